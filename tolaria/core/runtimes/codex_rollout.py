"""The context window and rate limits of a Codex turn, from Codex's own session file.

``codex exec --json`` prints a turn's tokens only (``turn.completed {usage}``); the model's
context window (``model_context_window``) and the plan's ``rate_limits`` are in the
``token_count`` events Codex writes to its session file (``$CODEX_HOME/sessions/YYYY/MM/DD/
rollout-...-<thread id>.jsonl``, tests/fixtures/sessions_live/codex/). At the turn's end the
last of them is read from the file's tail. Best effort: no file, no such line, nothing said.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tolaria.core import ratelimits
from tolaria.core.runtimes.jsonl import int_or_none

#: How much of the file's end is read: a token_count line is written at every model request.
_TAIL = 256 * 1024


@dataclass(frozen=True)
class TokenCount:
    context_tokens: int | None
    context_window: int | None
    rate_limits: list[ratelimits.Window] | None


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    """Where Codex keeps its files: the agent's CODEX_HOME (its own environment first, then
    Tolaria's, which it inherits), else ``~/.codex`` of the agent's HOME."""
    env = env or {}
    home = env.get("CODEX_HOME") or os.environ.get("CODEX_HOME")
    if home:
        return Path(os.path.expanduser(home))
    user = env.get("HOME")
    return (Path(user) if user else Path.home()) / ".codex"


def find_rollout(thread_id: str, home: Path | None = None) -> Path | None:
    """The session file of ``thread_id`` (newest days first), or None."""
    if not thread_id or "/" in thread_id or "*" in thread_id or "?" in thread_id:
        return None
    sessions = (home or codex_home()) / "sessions"
    try:
        days = sorted(sessions.glob("*/*/*"), reverse=True)
    except OSError:
        return None
    for day in days:
        found = sorted(day.glob(f"rollout-*-{thread_id}.jsonl"))
        if found:
            return found[-1]
    return None


def last_token_count(path: Path) -> TokenCount | None:
    """The last ``token_count`` event of a session file, or None."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - _TAIL))
            tail = f.read()
    except OSError:
        return None
    for raw in reversed(tail.splitlines()):
        if b'"token_count"' not in raw:
            continue
        try:
            payload = json.loads(raw).get("payload")
        except (ValueError, AttributeError):
            continue  # the first, cut line of the tail, or not an object
        if isinstance(payload, dict) and payload.get("type") == "token_count":
            return _token_count(payload)
    return None


def _token_count(payload: dict[str, Any]) -> TokenCount:
    info = payload.get("info")
    info = info if isinstance(info, dict) else {}
    last = info.get("last_token_usage")
    used = None
    if isinstance(last, dict):
        used = int_or_none(last.get("total_tokens"))
        if used is None:
            used = (int_or_none(last.get("input_tokens")) or 0) + \
                (int_or_none(last.get("output_tokens")) or 0) or None
    windows = ratelimits.from_codex(payload.get("rate_limits"))
    return TokenCount(used, int_or_none(info.get("model_context_window")), windows or None)
