"""``Store.reopen_turn``: a finished turn takes more events after those it has (an imported turn
its CLI went on writing, tolaria/chats/importing.py), on real SQLite files."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from core.store.storehelpers import SID
from helpers import text_of

from tolaria.core.events import Done, Init, TextDelta, ToolDone, ToolStart
from tolaria.core.store.db import Store


def test_a_reopened_turn_goes_on_after_its_events_and_finishes_again(db: Path) -> None:
    with closing(Store(db)) as store:
        conv = store.create_conversation("c", "claude", None)
        turn = store.start_turn(conv.id, SID, "claude", "p")
        store.append_event(Init(SID, agent="claude", session_id="native"))
        store.append_event(TextDelta(SID, "I'll run it."))
        store.append_event(ToolStart(SID, tool_id="t1", name="Bash", input={"command": "x"}))
        store.mark_interrupted(SID)
        before = store.events(turn.id)
        assert not store.reopen_turn("ai-agent-stream-nobody")
        assert store.reopen_turn(SID)
        assert not store.reopen_turn(SID), "already running"
        running = store.turn_by_stream(SID)
        assert running is not None and running.status == "running"
        assert running.finished_at is None and running.stop_reason is None
        store.append_event(ToolDone(SID, tool_id="t1", output="done"))
        store.append_event(TextDelta(SID, "\n\nThe command printed: done"))
        store.append_event(Done(SID, stop_reason="end_turn"))
        after = store.events(turn.id)
        assert after[:len(before)] == before, "what was stored stays as it was"
        assert text_of(after) == "I'll run it.\n\nThe command printed: done"
        finished = store.turn_by_stream(SID)
        assert finished is not None and finished.status == "completed"
        assert finished.session_id == "native"
    with closing(sqlite3.connect(db)) as conn:
        seqs = [s for (s,) in conn.execute("SELECT seq FROM events WHERE turn_id = ? ORDER BY rowid",
                                           (turn.id,))]
        assert seqs == list(range(len(seqs))), "the added rows go on after the first ones"


CRASH = """
import os, sys
from tolaria.core.events import TextDelta
from tolaria.core.store.db import Store
store = Store(__import__("pathlib").Path(sys.argv[1]))
assert store.reopen_turn(sys.argv[2])
store.append_event(TextDelta(sys.argv[2], " and more"))
store.flush()
os._exit(9)  # dies mid-import: no Done, no close
"""


def test_a_process_that_dies_with_a_reopened_turn_leaves_it_interrupted(db: Path) -> None:
    with closing(Store(db)) as store:
        conv = store.create_conversation("c", "claude", None)
        turn = store.start_turn(conv.id, SID, "claude", "p")
        store.append_event(TextDelta(SID, "partial"))
        store.append_event(Done(SID, stop_reason="end_turn"))
    died = subprocess.run([sys.executable, "-c", CRASH, str(db), SID], timeout=60, check=False,
                          capture_output=True, text=True)
    assert died.returncode == 9, died.stderr
    with closing(Store(db)) as store:
        stored = store.turn_by_stream(SID)
        assert stored is not None and stored.status == "interrupted"
        assert text_of(store.events(turn.id)) == "partial and more", "nothing lost"
