"""The words both readable exports (Markdown, HTML) use for a turn: its status line, a tool's
headline and status, durations and usage, as the transcript says them
(tolaria/ui/transcript/turn_model.py)."""

from __future__ import annotations

import json
from json.encoder import encode_basestring as _string  # what dumps(ensure_ascii=False) uses
from typing import Any

from tolaria.core.events import STOP_MAX_ITERATIONS, summarize_tool_input
from tolaria.core.store.schema import STOP_NOT_ANSWERED

STATUS_WORDS = {"completed": "Completed", "cancelled": "Stopped", "failed": "Failed",
                "interrupted": "Interrupted", "running": "Still running"}
TOOL_WORDS = {"pending": "waiting for approval", "running": "running", "done": "done",
              "failed": "failed", "cancelled": "cancelled", "interrupted": "interrupted",
              "unfinished": "no result"}
#: A status's tone (the HTML's colour): the transcript's.
TONES = {"completed": "ok", "done": "ok", "failed": "error", "cancelled": "warning",
         "interrupted": "warning", "unfinished": "muted", "running": "muted",
         "pending": "muted"}


def when(stamp: str | None) -> str:
    """An export time stamp (ISO 8601, UTC) as people read it: "2026-12-04 18:00:39 UTC"."""
    return f"{stamp[:10]} {stamp[11:19]} UTC" if stamp else ""


def duration(ms: int | None) -> str:
    if ms is None:
        return ""
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s"


def usage_line(usage: dict[str, Any]) -> str:
    parts = []
    if usage["input_tokens"] is not None or usage["output_tokens"] is not None:
        parts.append(f"{usage['input_tokens'] or 0:,} in / {usage['output_tokens'] or 0:,} out"
                     " tokens")
    if usage["cost_usd"] is not None:
        parts.append(f"${usage['cost_usd']:.4f}")
    return " · ".join(parts)


def status_line(turn: dict[str, Any]) -> str:
    """"Completed in 2.1 s · 1,200 in / 80 out tokens · $0.0100"."""
    status, reason = turn["status"], turn["stop_reason"]
    words = STATUS_WORDS.get(status, status.capitalize())
    took = duration(turn["duration_ms"])
    if status == "interrupted" and reason == STOP_NOT_ANSWERED:
        line = "Interrupted: no answer in the CLI's session"
    elif status == "interrupted":
        line = "Interrupted: Tolaria closed while this turn was running"
    elif reason == STOP_MAX_ITERATIONS:
        line = "Stopped at the tool-round limit" + (f" after {took}" if took else "")
    elif status == "completed":
        line = f"{words} in {took}" if took else words
    else:
        line = f"{words} after {took}" if took else words
    usage = usage_line(turn["usage"])
    return f"{line} · {usage}" if usage else line


def tool_headline(tool: dict[str, Any], limit: int = 160) -> str:
    """``$ command`` for a shell tool, the file an edit changes, else a summary of its input."""
    value = tool["input"]
    if isinstance(value, dict):
        command = value.get("command", value.get("cmd"))
        if isinstance(command, list):
            command = " ".join(map(str, command))
        if isinstance(command, str) and command.strip():
            line = " ".join(command.split())
            return "$ " + (line if len(line) <= limit else line[: limit - 1] + "…")
    if tool["diff"] is not None and tool["diff"]["path"]:
        return str(tool["diff"]["path"])
    return str(summarize_tool_input(value, limit))


def tool_status(tool: dict[str, Any]) -> str:
    return TOOL_WORDS.get(tool["status"], str(tool["status"]))


def input_json(value: object) -> str:
    """A tool's input as indented JSON (``json.dumps(indent=2)``; "(no input)" for none)."""
    if value in (None, {}):
        return "(no input)"
    if isinstance(value, dict) and all(type(k) is str and type(v) is str
                                       for k, v in value.items()):
        # Most inputs (a command, a path, an edit's strings): the same text without the
        # indenting encoder, which is pure Python (the C one cannot indent).
        return "{\n" + ",\n".join(f"  {_string(k)}: {_string(v)}" for k, v in value.items()) \
            + "\n}"
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def changes_line(changes: dict[str, Any]) -> list[str]:
    """One line per changed file ("modified src/a.py", "reverted" when put back)."""
    reverted = set(changes["reverted"])
    lines = [f"{f['status']} {f['path']}" + (" (reverted)" if f["path"] in reverted else "")
             for f in changes["files"]]
    if changes["rewound"]:
        lines.append("(rewound: these changes were undone)")
    if changes["notice"]:
        lines.append(str(changes["notice"]))
    return lines
