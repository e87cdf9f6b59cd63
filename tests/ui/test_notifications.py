"""Desktop notifications from the window, through a real D-Bus session bus of the test's own to
a real notification service process (tests/fakes/notification_server.py), with real agents.

The chat is out of view because another window of the test is the active one: nothing of
Tolaria may take the focus back (``focus is not taken``).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dbushelpers import NotificationServer, notification_server, session_bus
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, processes_of

from tolaria.chats.engine.limits import set_chat_limits
from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.limits import RunLimits
from tolaria.ui.transcript.permission_card import PermissionCard

__all__ = ["notification_server", "session_bus"]  # fixtures, used by name

pytest.importorskip("acp")

FAKES = Path(__file__).resolve().parent.parent / "fakes"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
Servers = Callable[..., NotificationServer]


def acp_manifest(mode: str, env: dict[str, str] | None = None) -> Manifest:
    return Manifest(id=f"fake-acp-{mode.replace('_', '-')}", name="Fake ACP agent",
                    protocol="acp", command=(sys.executable, str(FAKES / "fake_acp_agent.py"),
                                             mode),
                    env=env or {}, stop=StopPolicy(polite_window_ms=5000))


@pytest.fixture
def elsewhere(qtbot: QtBot) -> Iterator[Callable[[], QWidget]]:
    """Another window made the active one: Tolaria's chats are out of view."""
    made: list[QWidget] = []

    def activate() -> QWidget:
        other = QWidget()
        other.setWindowTitle("another application")
        other.resize(200, 100)
        qtbot.addWidget(other)
        other.show()
        qtbot.waitExposed(other)
        other.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is other)
        made.append(other)
        return other

    yield activate
    for widget in made:
        widget.close()


def wait_card(drv: AppDriver) -> PermissionCard:
    turn = drv.last_turn()
    drv.qtbot.waitUntil(lambda: len(turn.permission_cards()) >= 1, timeout=10_000)
    card = turn.permission_cards()[0]
    drv.qtbot.waitUntil(card.isVisible, timeout=5_000)
    return card


def wait_notify(qtbot: QtBot, server: NotificationServer, count: int = 1,
                timeout: int = 15_000) -> list[dict[str, Any]]:
    qtbot.waitUntil(lambda: len(server.notifications()) >= count, timeout=timeout)
    return server.notifications()


Asked = tuple[AppDriver, NotificationServer, str, QWidget, dict[str, Any]]


def started_on_bus(start_app: StartApp, qtbot: QtBot) -> AppDriver:
    drv = start_app()
    qtbot.waitUntil(lambda: drv.app.notifications.backend == "dbus", timeout=10_000)
    return drv


@pytest.fixture
def asking(start_app: StartApp, notification_server: Servers,
           elsewhere: Callable[[], QWidget], qtbot: QtBot, tmp_path: Path
           ) -> Callable[[], Asked]:
    """The scripted ACP agent asks its permission question while the chat is out of view:
    the window, the service, the run's stream, the active other window, the notification."""
    def ask() -> Asked:
        server = notification_server()
        gate = tmp_path / "ask-now"
        drv = started_on_bus(start_app, qtbot)
        drv.use_agent(acp_manifest("ask_permission", {"FAKE_ASK_WHEN": str(gate)}))
        stream_id = drv.send("clean up")
        other = elsewhere()
        gate.touch()
        [asked] = wait_notify(qtbot, server)
        return drv, server, stream_id, other, asked
    return ask


def test_allow_from_the_notification_reaches_the_agent_without_taking_the_focus(
        asking: Callable[[], Asked], qtbot: QtBot) -> None:
    drv, server, stream_id, other, asked = asking()
    assert asked["summary"].endswith("asks permission")
    assert asked["body"] == "rm -rf build"
    assert asked["actions"] == ["default", "Open", "allow", "Allow", "deny", "Deny"]
    assert asked["hints"]["desktop-entry"] == "tolaria"
    assert drv.window.windowTitle().startswith("(1) ")
    qtbot.waitUntil(lambda: any(c["args"][1]["count"] == 1
                                for c in server.calls("launcher.Update")), timeout=5_000)
    assert QApplication.activeWindow() is other and not drv.window.isActiveWindow()

    server.invoke(asked["id"], "allow")
    turn = drv.wait_finished()
    assert "permission: yes" in turn.text()
    assert turn.permission_cards()[0].outcome == "allow_once"
    qtbot.waitUntil(lambda: bool(server.calls("CloseNotification")), timeout=5_000)
    assert server.calls("CloseNotification")[0]["id"] == asked["id"]
    # The run's end is the next notification of the chat; the question is no longer counted.
    finished = wait_notify(qtbot, server, 2)[1]
    assert finished["summary"].endswith("finished")
    assert not drv.window.windowTitle().startswith("(")
    assert QApplication.activeWindow() is other and not drv.window.isActiveWindow()
    qtbot.wait(500)
    assert len(server.notifications()) == 2  # one per event: never doubled
    assert processes_of(stream_id) == []


def test_the_window_answers_first_and_the_notification_then_does_nothing(
        asking: Callable[[], Asked], qtbot: QtBot) -> None:
    drv, server, _stream, _other, asked = asking()
    card = wait_card(drv)
    QTest.mouseClick(card.buttons["rejectButton"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(server.calls("CloseNotification")), timeout=5_000)
    server.invoke(asked["id"], "allow")  # too late: a no-op
    turn = drv.wait_finished()
    assert "permission: no" in turn.text()
    assert turn.permission_cards()[0].outcome == "reject"


def test_one_notification_per_event_and_none_for_the_chat_in_view(
        start_app: StartApp, notification_server: Servers, elsewhere: Callable[[], QWidget],
        qtbot: QtBot) -> None:
    server = notification_server()
    drv = started_on_bus(start_app, qtbot)
    drv.send("in view")
    drv.wait_finished()
    qtbot.wait(300)
    assert server.notifications() == []  # the chat in view of the active window
    elsewhere()
    drv.send("out of view")
    drv.wait_finished()
    [finished] = wait_notify(qtbot, server)
    assert finished["summary"].endswith("finished") and finished["replaces"] == 0
    drv.send("again")
    drv.wait_finished()
    second = wait_notify(qtbot, server, 2)[1]
    assert second["replaces"] == finished["id"]  # replaced in place, not stacked
    qtbot.wait(300)
    assert len(server.notifications()) == 2


def test_a_silent_run_is_notified_with_stop_that_works(
        start_app: StartApp, notification_server: Servers, elsewhere: Callable[[], QWidget],
        qtbot: QtBot, home: Path) -> None:
    (home / "settings.toml").write_text("[notifications]\nstall_minutes = 0.01\n", "utf-8")
    server = notification_server()
    drv = started_on_bus(start_app, qtbot)
    drv.use_agent(acp_manifest("normal"))
    stream_id = drv.send("SLEEP please")
    turn = drv.last_turn()
    qtbot.waitUntil(lambda: [c.status for c in turn.tool_cards()] == ["running"],
                    timeout=10_000)
    elsewhere()
    notices = wait_notify(qtbot, server)
    stall = next(n for n in notices if n["summary"].endswith("is silent"))
    assert stall["body"] == "No output for 1 s."
    assert stall["actions"] == ["default", "Open", "stop", "Stop", "restart", "Restart"]
    server.invoke(stall["id"], "stop")
    turn = drv.wait_finished()
    assert turn.status == "cancelled"
    assert processes_of(stream_id) == []


def test_without_a_notification_service_the_tray_is_used(
        start_app: StartApp, session_bus: str, elsewhere: Callable[[], QWidget],
        qtbot: QtBot) -> None:
    drv = start_app()
    qtbot.waitUntil(lambda: drv.app.notifications.backend == "tray", timeout=10_000)
    elsewhere()
    drv.send("out of view")
    drv.wait_finished()
    tray = drv.app.notifications.tray
    qtbot.waitUntil(lambda: bool(tray.shown), timeout=5_000)
    summary, body = tray.shown[-1]
    assert summary.endswith("finished") and body == "The run finished."


def test_deny_from_the_notification_is_what_the_agent_hears(
        asking: Callable[[], Asked]) -> None:
    drv, server, _stream, _other, asked = asking()
    server.invoke(asked["id"], "deny")
    turn = drv.wait_finished()
    assert "permission: no" in turn.text()
    assert turn.permission_cards()[0].outcome == "reject"


def test_a_limit_that_stops_a_background_run_is_notified(
        start_app: StartApp, notification_server: Servers, elsewhere: Callable[[], QWidget],
        qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    server = notification_server()
    drv = started_on_bus(start_app, qtbot)
    set_chat_limits(drv.app.store, drv.pane.conversation_id, RunLimits(max_time_s=2))
    stream_id = drv.send("please run something long")
    elsewhere()
    turn = drv.wait_finished(timeout_ms=20_000)
    assert turn.status == "cancelled"
    [limit] = wait_notify(qtbot, server)
    assert limit["summary"].endswith("reached a limit")
    assert limit["body"] == "Stopped: 2 s limit reached"
    assert limit["hints"]["category"] == "x-tolaria.limit"
    assert processes_of(stream_id) == []


def test_without_any_session_bus_the_tray_is_used(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()  # DBUS_SESSION_BUS_ADDRESS is not set (tests/ui/conftest.py)
    qtbot.waitUntil(lambda: drv.app.notifications.backend == "tray", timeout=10_000)


def test_a_question_from_the_agent_is_notified_and_seen_when_the_chat_is_viewed(
        start_app: StartApp, notification_server: Servers, elsewhere: Callable[[], QWidget],
        qtbot: QtBot, tmp_path: Path) -> None:
    """A replayed Claude stream whose tool is ``AskUserQuestion`` (Claude Code's own question)."""
    lines = []
    for line in (FIXTURES / "claude" / "claude_echo.jsonl").read_text("utf-8").splitlines():
        data = json.loads(line)
        for block in data.get("message", {}).get("content", []) or []:
            if isinstance(block, dict) and block.get("name") == "Bash":
                block["name"] = "AskUserQuestion"
                block["input"] = {"questions": [{"question": "Which database?", "header": "DB",
                                                 "options": [{"label": "SQLite"}]}]}
        lines.append(json.dumps(data))
    stream = tmp_path / "ask.jsonl"
    stream.write_text("\n".join(lines) + "\n", "utf-8")
    server = notification_server()
    drv = started_on_bus(start_app, qtbot)
    drv.use_agent(Manifest(id="replay-question", name="Replayed Claude",
                           protocol="claude-stream-json",
                           command=(sys.executable, str(FAKES / "replay_agent.py"), str(stream),
                                    "{prompt}")))
    elsewhere()
    drv.send("plan the storage")
    drv.wait_finished()
    [notice] = wait_notify(qtbot, server)  # the run ended on it: no "finished" over it
    assert (notice["summary"], notice["body"]) == (
        "“plan the storage” asks you a question", "Which database?")
    qtbot.waitUntil(lambda: drv.window.windowTitle().startswith("(1) "))
    drv.window.activateWindow()  # the user comes back to the chat: seen
    qtbot.waitUntil(lambda: not drv.window.windowTitle().startswith("("), timeout=5_000)
    qtbot.waitUntil(lambda: bool(server.calls("CloseNotification")), timeout=5_000)


def test_notification_and_window_answering_at_once_answer_once(
        asking: Callable[[], Asked], qtbot: QtBot) -> None:
    """The race from a second process: the service invokes Allow (its own thread here, another
    process on the bus) while the user clicks Reject in the window. One answer wins; the agent
    hears exactly that one, and the card says the same."""
    drv, server, stream_id, _other, asked = asking()
    card = wait_card(drv)
    clicker = threading.Thread(target=server.invoke, args=(asked["id"], "allow"))
    clicker.start()
    QTest.mouseClick(card.buttons["rejectButton"], Qt.MouseButton.LeftButton)
    clicker.join(10)
    turn = drv.wait_finished()
    heard = [line for line in turn.text().splitlines() if "permission:" in line]
    assert len(heard) == 1, turn.text()
    expected = {"permission: yes": "allow_once", "permission: no": "reject"}
    [(words, outcome)] = [(w, o) for w, o in expected.items() if w in heard[0]]
    assert turn.permission_cards()[0].outcome == outcome, words
    assert processes_of(stream_id) == []


def test_restart_from_a_stall_notification_runs_the_turn_again(
        start_app: StartApp, notification_server: Servers, elsewhere: Callable[[], QWidget],
        qtbot: QtBot, home: Path) -> None:
    (home / "settings.toml").write_text("[notifications]\nstall_minutes = 0.01\n", "utf-8")
    server = notification_server()
    drv = started_on_bus(start_app, qtbot)
    drv.use_agent(acp_manifest("normal"))
    first = drv.send("SLEEP please")
    elsewhere()
    stall = next(n for n in wait_notify(qtbot, server) if n["summary"].endswith("is silent"))
    server.invoke(stall["id"], "restart")
    qtbot.waitUntil(lambda: drv.pane.running_stream not in (None, first), timeout=15_000)
    assert processes_of(first) == []
    second = drv.pane.running_stream
    assert second is not None
    drv.app.controller.stop(drv.pane.conversation_id)
    drv.wait_finished()
    assert processes_of(second) == []
