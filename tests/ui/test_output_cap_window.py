"""Output caps through the real window, controller and store (small caps set for the test)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, processes_of

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import Diagnostic, Event, TextDelta, ToolDone
from tolaria.core.output_cap import CAP_SOURCE

FLOOD_AGENT = Path(__file__).resolve().parent.parent / "fakes" / "flood_agent.py"
CAP, ITEM, TAIL = 100_000, 5_000, 2_000


@pytest.fixture(autouse=True)
def _small_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_MAX_TURN_CHARS", str(CAP))
    monkeypatch.setenv("TOLARIA_MAX_ITEM_CHARS", str(ITEM))
    monkeypatch.setenv("TOLARIA_TAIL_CHARS", str(TAIL))


def flood_agent(mode: str, chars: int) -> Manifest:
    return Manifest(id=f"flood-{mode}", name=f"Flood ({mode})", protocol="claude-stream-json",
                    command=(sys.executable, str(FLOOD_AGENT), mode, "{prompt}"),
                    env={"FLOOD_CHARS": str(chars)})


def stored(drv: AppDriver, stream_id: str) -> list[Event]:
    turn = drv.app.store.turn_by_stream(stream_id)
    assert turn is not None
    return drv.app.store.events(turn.id)


def stored_text(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_a_flood_of_three_caps_keeps_the_start_and_says_so_live_and_restored(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    drv.use_agent(flood_agent("text", 3 * CAP))
    stream_id = drv.send("flood me")
    turn = drv.wait_finished(timeout_ms=30_000)
    assert turn.status == "completed"
    assert turn.received_chars > 3 * CAP
    first, last = turn.cap_notices()
    assert first.startswith("Output truncated: this turn printed more than 98 KB; the rest was "
                            "not kept (the agent kept running; Stop ends it).")
    assert "of output was not kept. The last 2 KB of the answer:" in last
    label = turn.findChild(QLabel, "capNotice")
    assert label is not None
    qtbot.waitUntil(label.isVisible)
    assert turn.text().endswith("the end"), "the tail (how the flood ended) is shown"
    events = stored(drv, stream_id)
    text = stored_text(events)
    assert len(text) <= CAP + TAIL and text.startswith("[at 0]") and text.endswith("the end")
    assert [e.message for e in events if isinstance(e, Diagnostic)
            and e.source == CAP_SOURCE] == [first, last]
    shown = turn.text()
    drv.close()

    again = start_app()
    qtbot.waitUntil(lambda: bool(again.pane.turn_views()) and not again.pane.transcript.busy)
    restored = again.pane.turn_views()[0]
    assert restored.status == "completed"
    assert restored.cap_notices() == [first, last]
    assert restored.text() == shown


def test_stop_in_the_middle_of_an_endless_flood(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    drv.use_agent(flood_agent("text", 0))  # prints until it is stopped
    stream_id = drv.send("never stop")
    turn = drv.last_turn()
    qtbot.waitUntil(lambda: bool(turn.cap_notices()), timeout=20_000)
    qtbot.waitUntil(lambda: "Not kept so far" in turn.cap_notices()[0], timeout=10_000)
    assert drv.pane.running_stream == stream_id and processes_of(stream_id)
    drv.button("stopButton").click()
    turn = drv.wait_finished(timeout_ms=15_000)
    assert turn.status == "cancelled"
    assert processes_of(stream_id) == []
    events = stored(drv, stream_id)
    assert len(stored_text(events)) <= CAP + TAIL
    notices = [e.message for e in events if isinstance(e, Diagnostic) and e.source == CAP_SOURCE]
    assert len(notices) == 2 and notices[1].startswith("In all,")
    assert len(turn.cap_notices()) == 2


def test_one_huge_tool_output_is_clipped(start_app: StartApp) -> None:
    drv = start_app()
    drv.use_agent(flood_agent("tool", 50_000))
    stream_id = drv.send("cat the log")
    turn = drv.wait_finished(timeout_ms=20_000)
    assert turn.status == "completed"
    [card] = turn.tool_cards()
    assert card.output.startswith("HEAD") and card.output.endswith("TAIL")
    assert "not kept: longer than 5 KB" in card.output and len(card.output) < ITEM + 100
    [done] = [e for e in stored(drv, stream_id) if isinstance(e, ToolDone)]
    assert done.output == card.output
    assert "after the tool" in turn.text() and turn.cap_notices() == []


def test_a_stderr_flood_is_capped_too(start_app: StartApp) -> None:
    drv = start_app()
    drv.use_agent(flood_agent("stderr", 3 * CAP))
    stream_id = drv.send("complain")
    turn = drv.wait_finished(timeout_ms=20_000)
    assert turn.status == "completed" and "the end" in turn.text()
    events = stored(drv, stream_id)
    stderr = [e.message for e in events if isinstance(e, Diagnostic) and e.source == "stderr"]
    assert 0 < sum(map(len, stderr)) <= CAP
    assert turn.cap_notices()[0].startswith("Output truncated")
