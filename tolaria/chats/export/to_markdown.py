"""The Markdown export: a heading per turn, the prompt quoted, the answer as the agent wrote it,
tool calls as ``<details>`` blocks (their output fenced), diffs as ```` ```diff ````.

Fences are longer than any run of backticks inside them, so no output can close its fence
early; text that goes inside HTML tags (a summary line) is HTML-escaped.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from typing import Any, TextIO

from tolaria.chats.export.words import (
    changes_line,
    input_json,
    status_line,
    tool_headline,
    tool_status,
    when,
)
from tolaria.core.attachments.model import human_size

_TICKS = re.compile(r"`{3,}")


def fence(text: str, language: str = "") -> str:
    """``text`` in a fenced block that nothing inside it can close."""
    longest = max((len(m) for m in _TICKS.findall(text)), default=2)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text.rstrip(chr(10))}\n{ticks}\n"


def quote(text: str) -> str:
    """The prompt as a block quote; ``<`` and ``&`` escaped so a tag in it stays text."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;")
    return "\n".join("> " + line if line else ">" for line in escaped.splitlines()) + "\n"


def _summary(text: str) -> str:
    return html.escape(" ".join(text.split()), quote=False)


def write_markdown(head: dict[str, Any], turns: Iterable[dict[str, Any]], out: TextIO) -> None:
    chat = head["chat"]
    out.write(f"# {_summary(chat['title'] or 'Untitled chat')}\n\n")
    facts = [f"Agent: `{chat['agent']}`", f"Started: {when(chat['created_at'])}",
             f"Turns: {head['turn_count']}", f"Exported: {head['exported_at']} by Tolaria "
             f"{head['tolaria']}"]
    if chat["cwd"]:
        facts.insert(1, f"Folder: `{chat['cwd']}`")
    out.write("".join(f"- {fact}\n" for fact in facts))
    for turn in turns:
        out.write("\n---\n\n")
        _turn(turn, out)


def _turn(turn: dict[str, Any], out: TextIO) -> None:
    out.write(f"## Turn {turn['number']}\n\n")
    out.write(f"**You** · {when(turn['started_at'])}\n\n{quote(turn['prompt'])}\n")
    for file in turn.get("attachments", ()):  # the bytes are in the JSON export
        out.write(f"- 📎 {file['name']} ({human_size(file['size'])}, {file['media_type']})\n")
    if turn.get("attachments"):
        out.write("\n")
    out.write(f"**{turn['agent']}**\n\n")
    if turn["abandoned"]:
        out.write("*Abandoned: this turn was run again.*\n\n")
    for item in turn["items"]:
        _item(item, out)
    out.write(f"*{status_line(turn)}*\n")
    if turn["survivors"]:
        names = ", ".join(f"{s['name']} (pid {s['pid']})" for s in turn["survivors"])
        out.write(f"\n**Still running after the stop:** {names}\n")
    if turn["changes"] is not None:
        lines = changes_line(turn["changes"])
        if lines:
            out.write("\nChanged files:\n\n" + "".join(f"- `{line}`\n" for line in lines))


def _item(item: dict[str, Any], out: TextIO) -> None:
    kind = item["type"]
    if kind == "text":
        out.write(item["text"].strip("\n") + "\n\n")
    elif kind == "thinking":
        out.write(f"<details><summary>Thinking</summary>\n\n{quote(item['text'])}\n"
                  "</details>\n\n")
    elif kind == "tool":
        _tool(item, out)
    elif kind == "error":
        out.write(f"> **Error:** {_summary(item['message'])}\n")
        if item["hint"]:
            out.write(f">\n> {_summary(item['hint'])}\n")
        out.write("\n")
        if item["stderr"]:
            out.write(fence("\n".join(item["stderr"]), "text") + "\n")
    elif kind == "notice":
        out.write(f"*{_summary(item['message'])}*\n\n")
    elif kind == "question":
        out.write(f"*Permission asked: {_summary(item['title'])} → {item['outcome']}*\n\n")
    elif kind == "message":
        out.write(f"**You (while it ran):**\n\n{quote(item['text'])}\n")


def _tool(tool: dict[str, Any], out: TextIO) -> None:
    headline = _summary(tool_headline(tool))
    out.write(f"<details><summary><b>{_summary(tool['name'] or 'tool')}</b> "
              f"<code>{headline}</code> · {tool_status(tool)}</summary>\n\n")
    if tool["diff"] is not None:
        out.write(fence(tool["diff"]["text"], "diff") + "\n")
    out.write("Output:\n\n" + fence(tool["output"] or "(no output)", "text") + "\n")
    out.write("Input:\n\n" + fence(input_json(tool["input"]), "json") + "\n</details>\n\n")
