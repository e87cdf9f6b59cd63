"""Send now on Claude's stream-json turn stops it the normal way and sends the message next, as on
every agent (issue 22 item 8): the real Claude takes a mid-turn message only after its running
tool ends (tests/e2e/test_real_send_now.py), so steering would not be "now". Here with the fake
stream Claude on a kept process: the interrupt ends the turn, the agent process stays, and the
message is the next turn on it. A ``message_steered`` marker stored by an earlier build that did
steer is still shown."""

from __future__ import annotations

from pathlib import Path

import psutil
from pytestqt.qtbot import QtBot
from ui.test_keepers import fake_claude, kept
from ui.test_queue_chips import chip_button, chips, prompts, stored, texts
from ui.uihelpers import StartApp

from tolaria.core.store.db import MARKER_MESSAGES_DELIVERED, MARKER_STOP_REQUESTED
from tolaria.core.store.markers import MARKER_MESSAGE_STEERED
from tolaria.ui.transcript.cards.style import Bubble


def test_send_now_stops_a_claude_stream_turn_and_sends_next_on_the_kept_agent(
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
    qtbot.waitUntil(lambda: drv.pane.running_stream not in (None, running), timeout=10_000)
    qtbot.waitUntil(lambda: turn.status == "cancelled")
    assert "I'll run it." in turn.text(), "the stopped turn keeps its partial output"
    assert texts(drv) == ["later"] and stored(drv) == ["later"]
    drv.wait_finished()
    assert prompts(drv) == [("RUN_SLEEP please", "cancelled"), ("now please", "completed")]
    assert [m.data["messages"] for m in drv.app.store.markers(chat, MARKER_MESSAGES_DELIVERED)] \
        == [["now please"]]
    assert len(drv.app.store.markers(chat, MARKER_STOP_REQUESTED)) == 1
    assert drv.app.store.markers(chat, MARKER_MESSAGE_STEERED) == [], "nothing was steered"
    assert kept(drv, chat) == (marker, agent), "the interrupt ended the turn, not the agent"
    assert psutil.Process(agent.pid).is_running()
    drv.app.controller.delete(chat)


def test_a_steered_message_stored_by_an_earlier_build_is_still_shown(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    chat = drv.pane.conversation_id
    stream = drv.send("hello")
    turn = drv.wait_finished()
    drv.app.store.add_marker(chat, MARKER_MESSAGE_STEERED,
                             turn_id=drv.stored_turn(stream).id,
                             data={"id": 1, "text": "sent while it ran", "stream_id": stream})
    drv.pane.load_markers(drv.app.store.markers(chat))
    drv.pane.load_markers(drv.app.store.markers(chat))  # reopened: still once
    bubbles = turn.findChildren(Bubble, "steeredBubble")
    assert [b.text() for b in bubbles] == ["sent while it ran"]
