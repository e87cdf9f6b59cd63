"""The permission prompt in the chat, driven from the window against real agent processes.

The scripted ACP agent (tests/fakes/fake_acp_agent.py ``ask_permission``) asks before its
``rm -rf build`` tool and says in its answer what it was told; a model chat in "safe" mode asks
before each ``run_command`` (tests/fakes/fake_openai_server.py scripts the model).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, processes_of

from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.ui.transcript.permission_card import PermissionCard
from tolaria.ui.transcript.turn_view import TurnView

if TYPE_CHECKING:  # imported in the tests, after importorskip
    from fakes.fake_openai_server import FakeOpenAIServer

pytest.importorskip("acp")

FAKES = Path(__file__).resolve().parent.parent / "fakes"


def acp_manifest(mode: str = "ask_permission", env: dict[str, str] | None = None) -> Manifest:
    return Manifest(id=f"fake-acp-{mode.replace('_', '-')}", name="Fake ACP agent",
                    protocol="acp", command=(sys.executable, str(FAKES / "fake_acp_agent.py"),
                                             mode),
                    env=env or {}, stop=StopPolicy(polite_window_ms=5000))


def wait_card(drv: AppDriver, turn: TurnView | None = None, count: int = 1) -> PermissionCard:
    turn = turn or drv.last_turn()
    drv.qtbot.waitUntil(lambda: len(turn.permission_cards()) >= count, timeout=10_000)
    return turn.permission_cards()[count - 1]


def click(drv: AppDriver, card: PermissionCard, name: str) -> None:
    drv.qtbot.waitUntil(card.isVisible, timeout=5_000)
    QTest.mouseClick(card.buttons[name], Qt.MouseButton.LeftButton)


def test_allow_once_runs_the_tool(start_app: StartApp) -> None:
    drv: AppDriver = start_app()
    drv.use_agent(acp_manifest())
    stream_id = drv.send("clean up")
    card = wait_card(drv)
    assert card.pending and "rm -rf build" in card.input_label.text()
    assert set(card.buttons) == {"allowOnceButton", "allowAlwaysButton", "rejectButton"}
    # Non-modal: the chat stays usable while the question is open.
    assert drv.pane.composer.isEnabled() and QTest.qWaitForWindowActive(drv.window)
    click(drv, card, "allowOnceButton")
    turn = drv.wait_finished()
    assert turn.status == "completed"
    assert "permission: yes" in turn.text()
    assert [(c.title, c.status) for c in turn.tool_cards()] == [("rm -rf build", "done")]
    assert card.outcome == "allow_once" and card.status.text() == "Allowed once"
    assert not card.buttons["allowOnceButton"].isVisible()
    assert processes_of(stream_id) == []
    assert drv.app.controller.permissions.pending() == []


def test_reject_is_what_the_agent_hears(start_app: StartApp) -> None:
    drv: AppDriver = start_app()
    drv.use_agent(acp_manifest())
    stream_id = drv.send("clean up")
    click(drv, wait_card(drv), "rejectButton")
    turn = drv.wait_finished()
    assert turn.status == "completed"
    assert "permission: no" in turn.text()
    assert [c.status for c in turn.tool_cards()] == ["failed"]
    assert turn.permission_cards()[0].outcome == "reject"
    assert processes_of(stream_id) == []


def test_stop_while_asking_cancels_the_prompt(start_app: StartApp) -> None:
    drv: AppDriver = start_app()
    drv.use_agent(acp_manifest())
    stream_id = drv.send("clean up")
    card = wait_card(drv)  # the agent is running and waiting for the answer
    drv.button("stopButton").click()
    turn = drv.wait_finished()
    assert turn.status == "cancelled"
    assert card.outcome == "cancelled" and card.status.text().startswith("Cancelled")
    assert not card.buttons["allowOnceButton"].isVisible()
    assert processes_of(stream_id) == []
    assert drv.app.controller.permissions.pending() == []
    stored = drv.app.store.turn_by_stream(stream_id)
    assert stored is not None and stored.status == "cancelled"


def test_allow_always_answers_the_next_request_without_asking(
        start_app: StartApp) -> None:
    drv: AppDriver = start_app()
    drv.use_agent(acp_manifest())
    drv.send("clean up")
    click(drv, wait_card(drv), "allowAlwaysButton")
    first = drv.wait_finished()
    assert "permission: always" in first.text()
    assert first.permission_cards()[0].outcome == "allow_always"
    conversation = drv.pane.conversation_id
    assert drv.app.controller.permissions.remembered(conversation) == {"kind:execute"}

    stream_id = drv.send("clean up again")  # the (kept) agent asks again
    second = drv.wait_finished()
    assert second.status == "completed"
    assert "permission: always" in second.text()
    [card] = second.permission_cards()
    assert card.outcome == "remembered"  # shown as answered, never as a question
    assert "earlier in this conversation" in card.status.text()
    assert processes_of(stream_id) == []
    # Another conversation does not inherit it.
    assert drv.app.controller.permissions.remembered(conversation + 1) == frozenset()


def test_keyboard_answers_and_the_composer_keeps_the_focus(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv: AppDriver = start_app()
    drv.use_agent(acp_manifest())
    drv.send("clean up")
    drv.pane.composer.setFocus()
    card = wait_card(drv)
    qtbot.waitUntil(card.isVisible, timeout=5_000)
    assert drv.pane.composer.hasFocus(), "a question must not take the focus"
    QTest.keyClicks(drv.pane.composer, "typed meanwhile")
    assert drv.pane.composer.toPlainText() == "typed meanwhile"
    # The chat's shortcut brings the focus to the open question; Tab walks its buttons.
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_A,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(card.buttons["allowOnceButton"].hasFocus, timeout=2_000)
    QTest.keyClick(card.buttons["allowOnceButton"], Qt.Key.Key_Tab)
    QTest.keyClick(card.buttons["allowAlwaysButton"], Qt.Key.Key_Tab)
    reject = card.buttons["rejectButton"]
    qtbot.waitUntil(reject.hasFocus, timeout=2_000)
    QTest.keyClick(reject, Qt.Key.Key_Return)
    turn = drv.wait_finished()
    assert "permission: no" in turn.text()
    assert card.outcome == "reject"


def test_tool_card_takes_the_real_command_live(start_app: StartApp, tmp_path: Path) -> None:
    """The scripted agent's sleep tool starts as "Terminal" and is then renamed by an update."""
    drv: AppDriver = start_app()
    drv.use_agent(acp_manifest("normal", env={"FAKE_PIDFILE": str(tmp_path / "pids")}))
    stream_id = drv.send("SLEEP now")
    turn = drv.last_turn()
    drv.qtbot.waitUntil(lambda: [c.title for c in turn.tool_cards()] == ["sleep 300"],
                        timeout=10_000)
    assert turn.tool_cards()[0].status == "running"
    drv.button("stopButton").click()
    turn = drv.wait_finished()
    assert turn.status == "cancelled"
    assert [(c.title, c.status) for c in turn.tool_cards()] == [("sleep 300", "cancelled")]
    assert processes_of(stream_id) == []


# --- model chats in safe mode --------------------------------------------------------------------


@pytest.fixture
def model_server() -> Iterator[FakeOpenAIServer]:
    pytest.importorskip("httpx")
    from fakes.fake_openai_server import FakeOpenAIServer

    server = FakeOpenAIServer().start()
    yield server
    server.stop()


# The test loop (tolaria/qt/loop.attach_running_loop) installs no async-generator hooks, so
# httpx's line iterators, left unclosed by ChatHelper._fetch when it returns at "[DONE]", are
# finalized by the garbage collector after the loop is gone (the app's own loop has the hooks).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_model_chat_command_asks_first(
        start_app: StartApp, model_server: FakeOpenAIServer, tmp_path: Path) -> None:
    from fakes.fake_openai_server import text_reply, tool_reply

    from tolaria.core.modelchat.command_approval import DECLINED

    model_server.script(tool_reply(("c1", "run_command", {"command": "touch ran"})),
                        text_reply("As you wish."))
    drv: AppDriver = start_app()
    drv.use_agent(Manifest(id="fake-model", name="Fake model", protocol="openai-chat",
                           command=(), base_url=model_server.base_url, model="m"))
    drv.app.controller.set_cwd(drv.pane.conversation_id, str(tmp_path))
    drv.send("make a file")
    card = wait_card(drv)
    assert card.title == "touch ran"
    assert [c.title for c in drv.last_turn().tool_cards()] == ["run_command"]
    click(drv, card, "rejectButton")
    turn = drv.wait_finished()
    assert turn.status == "completed" and "As you wish." in turn.text()
    assert not (tmp_path / "ran").exists()
    tool_messages = [m for m in model_server.requests[1].body["messages"] if m["role"] == "tool"]
    assert tool_messages == [{"role": "tool", "tool_call_id": "c1", "content": DECLINED}]
