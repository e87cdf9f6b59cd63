"""What the store tests compare with: the event log as the store may legitimately return it,
and a raw row count that bypasses the Store."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from tolaria.core.events import Event, TextDelta, ThinkingDelta

SID = "ai-agent-stream-test"


def squash(events: list[Event]) -> list[Event]:
    """Merge consecutive deltas of one kind: what the store may legitimately do to a log."""
    out: list[Event] = []
    for event in events:
        last = out[-1] if out else None
        if isinstance(event, TextDelta | ThinkingDelta) and type(last) is type(event):
            assert isinstance(last, TextDelta | ThinkingDelta)
            out[-1] = type(event)(event.stream_id, last.text + event.text)
        elif not (isinstance(event, TextDelta | ThinkingDelta) and event.text == ""):
            out.append(event)
    return out


def raw_count(db: Path, table: str) -> int:
    with closing(sqlite3.connect(db)) as conn:
        count: int = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        return count
