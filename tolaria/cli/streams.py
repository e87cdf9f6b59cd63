"""``tolaria streams`` and ``tolaria abort ID``: the live runs of every Tolaria process.

Light on purpose: ``tolaria abort`` is a stop from another terminal, and its start-up is part of
the stop's latency. Only the synchronous control-socket client is imported (no asyncio, no
store, no runner); tests/cli/test_fast_commands.py checks the import set.
"""

from __future__ import annotations

import sys
import time

from tolaria.core.process import control_client
from tolaria.core.stream_id import InvalidStreamId, validate_stream_id

TYPE_CHECKING = False  # not typing's: importing typing costs ``tolaria abort`` ~3 ms
if TYPE_CHECKING:
    from typing import Any

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT = 0, 1, 2
COLUMNS = ("STREAM ID", "AGENT", "CHAT", "ELAPSED", "OWNER PID")
_CHAT_CHARS = 40


def elapsed(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h04m``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _row(stream: dict[str, Any], now: float) -> tuple[str, ...]:
    started = stream.get("started_at")
    chat = str(stream.get("chat") or "-")
    if len(chat) > _CHAT_CHARS:
        chat = chat[:_CHAT_CHARS - 1] + "…"
    state = stream.get("state")
    agent = str(stream.get("agent") or "?") + (f" ({state})" if state not in (None, "running")
                                               else "")
    if stream.get("host"):  # a run on another machine
        agent += f" on {stream['host']}"
    return (str(stream.get("stream_id", "?")), agent, chat,
            elapsed(now - started) if isinstance(started, int | float) else "?",
            str(stream.get("owner_pid", "?")))


def _safe(cell: str) -> str:
    """``cell`` safe for a terminal. A printable one has no control character, so nothing to
    remove: re (for_terminal's regexes, ~5 ms of start-up) is imported only for the others."""
    if cell.isprintable():
        return cell
    from tolaria.cli.terminal import for_terminal

    return for_terminal(cell)


def table(streams: list[dict[str, Any]], now: float | None = None) -> str:
    """The streams as an aligned table with a header (text safe for a terminal)."""
    now = time.time() if now is None else now
    rows = [COLUMNS, *(tuple(_safe(c) for c in _row(s, now)) for s in streams)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def cmd_streams(as_json: bool) -> int:
    streams = control_client.list_streams()
    if as_json:  # json and terminal's regexes: only here, the table needs neither
        from tolaria.cli.terminal import json_line

        print(json_line(streams, indent=2))
    elif not streams:
        print("no live runs")
    else:
        print(table(streams))
    return EXIT_OK


def cmd_abort(stream_id: str) -> int:
    try:
        validate_stream_id(stream_id)
    except InvalidStreamId as exc:
        from tolaria.cli.terminal import for_terminal

        print(f"tolaria: {for_terminal(str(exc))}", file=sys.stderr)
        print("false")
        return EXIT_BAD_INPUT
    stopped, survivors = control_client.abort_report(stream_id)
    print("true" if stopped else "false")
    if survivors:  # stopped, but not all of it: say what still runs, as the window does
        from tolaria.cli.terminal import for_terminal

        alive = ", ".join(f"{name} ({pid})" for pid, name in survivors)
        print(f"tolaria: the stop left {len(survivors)} process"
              f"{'es' if len(survivors) != 1 else ''} of {stream_id} alive: "
              f"{for_terminal(alive)}", file=sys.stderr)
    return EXIT_OK if stopped else EXIT_ERROR

