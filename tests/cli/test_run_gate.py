"""``tolaria run`` follows the window's stop rule (the turn engine's stream gate,
tolaria/chats/engine/gate.py): after Ctrl+C, what the agent still says while it winds down is
neither printed nor stored; what it said before is kept, and the run ends cancelled."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from cli.test_cli import EXIT_CANCELLED, Background
from helpers import cli_env, marker_pids

from tolaria.core.events import TextDelta
from tolaria.core.store.db import Store
from tolaria.core.stream_id import new_stream_id

#: Says "before the stop", then waits; on SIGINT (its polite stop) says "after the stop" and
#: exits 0, as an agent that answers an interrupt with a last sentence.
TALKER = """\
import signal, sys, time
def interrupted(_sig, _frame):
    print("after the stop", flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, interrupted)
print("before the stop", flush=True)
time.sleep(60)
"""


def test_what_the_agent_says_after_ctrl_c_is_neither_printed_nor_stored(
        tolaria_home: Path) -> None:
    (tolaria_home / "adapters").mkdir()
    (tolaria_home / "adapters" / "talker.toml").write_text(
        f'id = "talker"\nprotocol = "lines"\n'
        f'command = [{json.dumps(sys.executable)}, "-c", {json.dumps(TALKER)}, "{{prompt}}"]\n'
        '[stop]\npolite = "sigint"\npolite_window_ms = 3000\n')
    sid = new_stream_id()
    runner = Background(["run", "--json", "--stream-id", sid, "--agent", "talker", "hi"],
                        cli_env(tolaria_home), tolaria_home)
    try:
        runner.wait_until(lambda: "before the stop" in "".join(runner.stdout), "the first words")
        runner.proc.send_signal(signal.SIGINT)
        assert runner.finish() == EXIT_CANCELLED
    finally:
        runner.kill()
    events = runner.events()
    printed = "".join(e.get("text", "") for e in events if e["kind"] == "text_delta")
    assert "before the stop" in printed and "after the stop" not in printed
    assert events[-1]["kind"] == "done" and events[-1]["stop_reason"] == "cancelled"
    store = Store(tolaria_home / "data" / "tolaria.sqlite3")
    try:
        turn = store.turn_by_stream(sid)
        assert turn is not None and turn.status == "cancelled"
        stored = "".join(e.text for e in store.events(turn.id) if isinstance(e, TextDelta))
    finally:
        store.close()
    assert "before the stop" in stored and "after the stop" not in stored
    assert marker_pids(sid) == []
