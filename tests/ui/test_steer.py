"""Send now on a steerable run (issue 18 item 3, "steer where the agent supports it natively"):
Claude's stream-json input takes another user message into the running turn, so the queued
message is written to the running agent's stdin, with no stop; other agents keep stop-then-send
(tests/ui/test_queue_chips.py)."""

from __future__ import annotations

from pathlib import Path

import psutil
from pytestqt.qtbot import QtBot
from ui.test_keepers import fake_claude, kept
from ui.test_queue_chips import chip_button, chips, prompts, stored, texts
from ui.uihelpers import StartApp

from tolaria.core.store.db import MARKER_MESSAGES_DELIVERED, MARKER_STOP_REQUESTED
from tolaria.core.store.markers import MARKER_MESSAGE_STEERED
from tolaria.ui.cards.style import Bubble


def test_send_now_steers_a_claude_stream_turn_without_stopping_it(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path) -> None:
    drv = start_app(cwd=str(tmp_path))
    drv.use_agent(fake_claude())
    chat = drv.pane.conversation_id
    running = drv.send("RUN_SLEEP please")
    turn = drv.pane.transcript.turn(running)
    assert turn is not None
    qtbot.waitUntil(lambda: any(c.status == "running" for c in turn.tool_cards()),
                    timeout=10_000)
    marker, agent = kept(drv, chat)
    drv.app.controller.queues.set_paused(chat, True)  # only the chosen message goes
    for text in ("later", "now please"):
        drv.app.controller.queue(chat, text)
    qtbot.waitUntil(lambda: texts(drv) == ["later", "now please"])
    chip_button(chips(drv)[1], "queuedSendNowButton").click()
    qtbot.waitUntil(lambda: texts(drv) == ["later"])
    assert stored(drv) == ["later"], "taken off the stored queue"
    assert drv.pane.running_stream == running, "the same turn runs on: no stop, no new turn"
    finished = drv.wait_finished()
    assert finished is turn and turn.status == "completed"
    assert "Steered: now please" in turn.text(), "the agent took it into the running turn"
    bubble = turn.findChild(Bubble, "steeredBubble")
    assert bubble is not None and bubble.text() == "now please"
    assert prompts(drv) == [("RUN_SLEEP please", "completed")]
    steered = drv.app.store.markers(chat, MARKER_MESSAGE_STEERED)
    assert [m.data["text"] for m in steered] == ["now please"]
    assert steered[0].data["stream_id"] == running
    assert drv.app.store.markers(chat, MARKER_STOP_REQUESTED) == []
    assert drv.app.store.markers(chat, MARKER_MESSAGES_DELIVERED) == []
    assert kept(drv, chat) == (marker, agent), "the agent process was not stopped"
    assert psutil.Process(agent.pid).is_running()
    # Reopening the chat shows the bubble once (from the stored marker), not twice.
    drv.pane.load_markers(drv.app.store.markers(chat))
    assert len(turn.findChildren(Bubble, "steeredBubble")) == 1
    drv.app.controller.delete(chat)
