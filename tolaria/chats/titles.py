"""Chat titles: a chat is named after its first prompt (the window's "New chat" until then, a
``tolaria run`` chat likewise), a fan-out member after the prompt and its agent."""

from __future__ import annotations

#: The title of a chat whose first prompt has not been sent yet.
DEFAULT_TITLE = "New chat"
#: Characters of a chat title taken from its first prompt.
TITLE_CHARS = 48


def clip_line(text: str, limit: int) -> str:
    """``text`` on one line (runs of whitespace become one space), at most ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def title_from_prompt(prompt: str) -> str:
    """The title a chat gets from its first prompt (``DEFAULT_TITLE`` for a blank one)."""
    return clip_line(prompt, TITLE_CHARS) or DEFAULT_TITLE
