"""Send now with the real Claude Code in the window (issue 22 item 8): while the real CLI runs a
tool that would take five minutes (``sleep 300``), "Send now" on a queued message stops the turn
the normal way (the interrupt: cancelled, partial output kept, the ``sleep`` gone) and the message
is answered as the next turn, on the same kept Claude process. What the chip's tooltip and the
README say. Why it does not steer instead: tests/e2e/test_real_send_now.py.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from e2e.clis import run_env
from e2e.e2ehelpers import installed_cli, manifest, sleep_pids
from e2e.fake_model import FakeModelServer
from pytestqt.qtbot import QtBot
from ui.test_keepers import kept
from ui.test_queue_chips import chip_button, chips, prompts, texts
from ui.uihelpers import StartApp

from tolaria.core.store.db import MARKER_MESSAGES_DELIVERED
from tolaria.core.store.markers import MARKER_MESSAGE_STEERED
from tolaria.ui.composer.queue_chips import QueuedChip

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TURN_MS = 90_000


@pytest.fixture
def fake_model() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    yield server
    server.stop()


def test_send_now_stops_the_real_claude_mid_tool_and_sends_next(
        start_app: StartApp, qtbot: QtBot, fake_model: FakeModelServer, tmp_path: Path) -> None:
    cli = installed_cli("claude")
    real = dataclasses.replace(manifest("claude"), id="claude-real-e2e", name="Claude Code (e2e)",
                               env=run_env(cli, tmp_path / "home", fake_model.url),
                               permissions="full")
    work = tmp_path / "work"
    drv = start_app(cwd=str(work))
    drv.use_agent(real)
    chat = drv.pane.conversation_id
    running = drv.send("E2E-SLEEP: run the slow command")
    turn = drv.pane.transcript.turn(running)
    assert turn is not None
    keepers, key = drv.app.controller.keepers, drv.app.controller.keep_key(chat)
    qtbot.waitUntil(lambda: bool((sid := keepers.stream_id(key)) and sleep_pids(sid)),
                    timeout=TURN_MS)
    marker, agent = kept(drv, chat)
    [sleeper] = [psutil.Process(p) for p in sleep_pids(marker)]
    drv.app.controller.queue(chat, "E2E-TEXT: and now this")
    qtbot.waitUntil(lambda: texts(drv) == ["E2E-TEXT: and now this"])
    button = chip_button(chips(drv)[0], "queuedSendNowButton")
    assert "stops the running turn" in button.toolTip()
    clicked = time.monotonic()
    button.click()
    qtbot.waitUntil(lambda: drv.pane.running_stream not in (None, running), timeout=10_000)
    took = time.monotonic() - clicked
    qtbot.waitUntil(lambda: turn.status == "cancelled")
    assert "I'll run it." in turn.text(), "the stopped turn keeps its partial output"
    qtbot.waitUntil(lambda: not sleeper.is_running() or sleeper.status() == psutil.STATUS_ZOMBIE,
                    timeout=5_000)
    assert took < 5, f"Send now took {took:.1f} s to stop the turn and send"
    answered = drv.wait_finished(timeout_ms=TURN_MS)
    # (Claude sends the stopped tool's "rejected" result along with the message, so the fake
    # model answers with that result: the message itself is checked at the model.)
    assert answered.status == "completed" and answered.text().startswith("The command printed")
    last = fake_model.requests("anthropic")[-1].body["messages"][-1]
    assert "E2E-TEXT: and now this" in str(last)
    assert prompts(drv) == [("E2E-SLEEP: run the slow command", "cancelled"),
                            ("E2E-TEXT: and now this", "completed")]
    assert [m.data["messages"] for m in drv.app.store.markers(chat, MARKER_MESSAGES_DELIVERED)] \
        == [["E2E-TEXT: and now this"]]
    assert drv.app.store.markers(chat, MARKER_MESSAGE_STEERED) == []
    assert kept(drv, chat) == (marker, agent), "the next turn ran on the same Claude process"
    assert not drv.pane.findChildren(QueuedChip)
    drv.app.controller.delete(chat)
