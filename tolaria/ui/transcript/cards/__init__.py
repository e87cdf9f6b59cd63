"""The designed pieces of a turn: code blocks, tool cards, diffs, message headers and actions.

Leaf widgets (they import nothing of the transcript); tolaria/ui/transcript/blocks.py and
tolaria/ui/transcript/turn_view.py put them together.
"""
