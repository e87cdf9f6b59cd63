"""Stop at the very end of a turn keeps the whole answer (issue 22 item 5).

The agent (tests/fakes/tail_agent.py, a real process) prints the first part of its answer and
exits by itself; the rest of the answer comes from a helper still holding its stdout, which
prints it only when the test says so. The Stop lands after the run has seen the agent's exit
(its abort answers False: too late) and before the tail has drained: the tail must still be
shown and stored, and the turn reads completed, with no "Stopping…" left behind.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ui.uihelpers import AppDriver, StartApp, processes_of

from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.events import TextDelta

FAKES = Path(__file__).resolve().parent.parent / "fakes"
FIRST = "The first part of the answer. "
LAST = "And these are the last words."


def tail_manifest(folder: Path) -> Manifest:
    return Manifest(id="fake-tail", name="Fake tail agent", protocol="claude-stream-json",
                    command=(sys.executable, str(FAKES / "tail_agent.py"), "{prompt}"),
                    env={"FAKE_TAIL_DIR": str(folder)}, stop=StopPolicy(polite="none"))


@pytest.mark.parametrize("how", ["stop", "stop_all"])
def test_stop_after_the_agent_exited_keeps_the_tail(start_app: StartApp, tmp_path: Path,
                                                     how: str) -> None:
    drv: AppDriver = start_app(grace_s=10.0)  # the helper's SIGTERM wait is within the grace
    drv.use_agent(tail_manifest(tmp_path))
    stream_id = drv.send("answer me")
    # The agent exited by itself and the run is ending the helper: the tail is still to come.
    drv.qtbot.waitUntil((tmp_path / "term").exists, timeout=10_000)
    turn = drv.last_turn()
    drv.qtbot.waitUntil(lambda: FIRST.strip() in turn.text(), timeout=5_000)
    assert LAST not in turn.text()
    controller = drv.app.controller
    if how == "stop":
        assert controller.stop(drv.pane.conversation_id) is False, "too late to stop"
    else:
        assert controller.stop_all() == []
    assert turn.footer.text() != "Stopping…"
    (tmp_path / "go").write_text("")  # now the tail drains
    turn = drv.wait_finished()
    assert turn.status == "completed"
    assert turn.text().replace("\n", "") == FIRST + LAST
    stored = drv.stored_turn(stream_id)
    assert stored.status == "completed"
    events = drv.app.store.events(stored.id)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == FIRST + LAST
    assert processes_of(stream_id) == []


def test_a_stop_that_takes_still_says_stopping(start_app: StartApp,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The other side: a Stop that takes is announced and ends the turn cancelled."""
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv: AppDriver = start_app()
    stream_id = drv.send("run something long")
    drv.wait_tool_running(stream_id)
    assert drv.app.controller.stop(drv.pane.conversation_id) is True
    turn = drv.last_turn()
    assert turn.footer.text() == "Stopping…"
    turn = drv.wait_finished()
    assert turn.status == "cancelled"
    assert processes_of(stream_id) == []


def test_bridge_stop_all_settles_each_stream_and_an_abort_that_raises_holds_none(
        start_app: StartApp) -> None:
    """``Bridge.stop_all`` (Stop all, quitting): the aborted stream says "stopping" and drops
    what follows; the one already finishing by itself is forwarded again (its tail kept); an
    ``abort_all`` that raises leaves every stream open, none silently held."""
    from tolaria.qt.bridge import Bridge

    drv = start_app()
    bridge = Bridge()
    seen: list[tuple[str, str]] = []
    stopping: list[str] = []
    bridge.event_received.connect(lambda sid, ev: seen.append((sid, ev.text)))
    bridge.run_stopping.connect(stopping.append)
    stopped, finishing = "ai-agent-stream-stopped", "ai-agent-stream-finishing"
    for sid in (stopped, finishing):
        bridge.open_stream(sid)
    assert bridge.stop_all([stopped, finishing], lambda: [stopped]) == [stopped]
    assert stopping == [stopped]
    for sid in (stopped, finishing):
        bridge.deliver(TextDelta(sid, text="after"))
    drv.qtbot.waitUntil(lambda: (finishing, "after") in seen, timeout=5_000)
    assert (stopped, "after") not in seen

    def raising() -> list[str]:
        raise RuntimeError("the registry failed")

    with pytest.raises(RuntimeError):
        bridge.stop_all([finishing], raising)
    assert stopping == [stopped]
    bridge.deliver(TextDelta(finishing, text="still forwarded"))
    drv.qtbot.waitUntil(lambda: (finishing, "still forwarded") in seen, timeout=5_000)
    assert (stopped, "after") not in seen
