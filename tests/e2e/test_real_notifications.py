"""The real Claude permission flow answered from a desktop notification: Zed's claude-agent-acp
(Claude Code through ACP, permissions "safe"; a project rule makes it ask before every shell
command, which it would otherwise run unasked for ``echo``) runs in the window against the
loopback fake model, which asks for one shell call (``echo hi``). The chat is out of
view (another window is active), so the question goes to the test's own D-Bus session bus as a
notification (tests/fakes/notification_server.py); its Allow, invoked there as a user's click,
reaches Claude, the command runs, and the turn completes. Nothing takes the focus.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dbushelpers import NotificationServer, notification_server, session_bus
from e2e.clis import run_env
from e2e.e2ehelpers import installed_cli, manifest
from e2e.fake_model import FakeModelServer
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot
from ui.conftest import qloop, start_app
from ui.uihelpers import StartApp, processes_of

__all__ = ["notification_server", "qloop", "session_bus", "start_app"]  # fixtures, by name

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TURN_MS = 90_000


@pytest.fixture(autouse=True)
def _own_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)


@pytest.fixture
def other_window(qtbot: QtBot) -> Iterator[QWidget]:
    other = QWidget()
    other.setWindowTitle("another application")
    qtbot.addWidget(other)
    yield other
    other.close()


def test_allow_from_a_notification_reaches_the_real_claude(
        start_app: StartApp, notification_server: Callable[..., NotificationServer],
        model_server: FakeModelServer, other_window: QWidget, qtbot: QtBot,
        tmp_path: Path) -> None:
    cli = installed_cli("claude-acp")
    installed_cli("claude")
    real = dataclasses.replace(manifest("claude-acp"), id="claude-acp-e2e",
                               name="Claude Code (ACP, e2e)",
                               env=run_env(cli, tmp_path / "home", model_server.url))
    assert real.permissions == "safe"
    # Claude Code runs commands it judges harmless (echo, sleep) without asking; a project
    # rule of the user's makes it ask before every shell command (its own "ask" rules).
    claude_dir = tmp_path / "work" / ".claude"
    claude_dir.mkdir(parents=True)
    (claude_dir / "settings.json").write_text('{"permissions": {"ask": ["Bash"]}}', "utf-8")
    server = notification_server()
    drv = start_app(cwd=str(tmp_path / "work"))
    qtbot.waitUntil(lambda: drv.app.notifications.backend == "dbus", timeout=10_000)
    drv.use_agent(real)
    other_window.show()
    qtbot.waitExposed(other_window)
    other_window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is other_window)

    stream_id = drv.send("E2E-ECHO: run echo hi")
    qtbot.waitUntil(lambda: any(n["summary"].endswith("asks permission")
                                for n in server.notifications()), timeout=TURN_MS)
    [asked] = [n for n in server.notifications() if n["summary"].endswith("asks permission")]
    assert "allow" in asked["actions"] and "deny" in asked["actions"], asked
    assert drv.window.windowTitle().startswith("(1) ")
    server.invoke(asked["id"], "allow")
    turn = drv.wait_finished(timeout_ms=TURN_MS)
    assert turn.status == "completed", turn.text()
    [card] = turn.permission_cards()
    assert card.outcome in ("allow_once", "allow_always")
    assert [c.status for c in turn.tool_cards()] == ["done"]
    # The command ran (allowed): the model got its output and quoted it.
    assert "The command printed: hi" in turn.text(), turn.text()
    qtbot.waitUntil(lambda: any(n["summary"].endswith("finished")
                                for n in server.notifications()), timeout=10_000)
    asks = [n for n in server.notifications() if n["summary"].endswith("asks permission")]
    assert len(asks) == 1, "one notification per question"
    assert QApplication.activeWindow() is other_window and not drv.window.isActiveWindow()
    assert not drv.window.windowTitle().startswith("(")
    drv.close()
    assert processes_of(stream_id) == []
