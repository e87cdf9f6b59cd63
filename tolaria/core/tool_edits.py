"""What an edit tool changes, as unified diff text (no Qt: the transcript's diff card and the
chat export both show it).

Agents describe edits in a few shapes: Claude's ``Edit`` (``file_path``, ``old_string``,
``new_string``), ``MultiEdit`` (``edits``), ``Write`` (``file_path``, ``content``), and patch
text (Codex's ``apply_patch``, ACP diffs). ``edit_of`` turns any of them into (path, diff).
"""

from __future__ import annotations

import difflib

#: Lines of a diff shown at most (the rest is counted, the store keeps the tool input).
MAX_DIFF_LINES = 400


def _unified(old: str, new: str) -> list[str]:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=2)
    return [line for line in lines if not line.startswith(("---", "+++"))]


def edit_of(tool_input: object) -> tuple[str, str] | None:
    """(file path, diff text) when ``tool_input`` describes a file edit; None otherwise."""
    if not isinstance(tool_input, dict):
        return None
    path = tool_input.get("file_path") or tool_input.get("path") or tool_input.get("filename")
    path = path if isinstance(path, str) else ""
    lines: list[str] = []
    if isinstance(tool_input.get("old_string"), str) and isinstance(
            tool_input.get("new_string"), str):
        lines = _unified(tool_input["old_string"], tool_input["new_string"])
    elif isinstance(tool_input.get("edits"), list):
        for edit in tool_input["edits"]:
            if isinstance(edit, dict) and isinstance(edit.get("old_string"), str) \
                    and isinstance(edit.get("new_string"), str):
                lines += _unified(edit["old_string"], edit["new_string"])
    elif path and isinstance(tool_input.get("content"), str):
        lines = ["@@ new file @@", *("+" + line for line in tool_input["content"].splitlines())]
    else:
        for key in ("patch", "diff", "input"):
            value = tool_input.get(key)
            if isinstance(value, str) and ("\n+" in value or "\n-" in value):
                lines = value.splitlines()
                break
    if not lines:
        return None
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"… {len(lines) - MAX_DIFF_LINES} more lines"]
    return path, "\n".join(lines)
