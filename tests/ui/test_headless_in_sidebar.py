"""A turn run with ``tolaria run`` (tolaria/chats/saved_runs.py) is in the window's sidebar at
the next start, with its transcript."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp

from tolaria.ui.sidebar.sidebar import COMMAND_LINE_ROLE

ROOT = Path(__file__).resolve().parents[2]


def test_a_headless_turn_shows_up_in_the_window(start_app: StartApp, home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    env.update(PYTHONPATH=str(ROOT))
    ran = subprocess.run([sys.executable, "-m", "tolaria", "run", "--agent", "demo",
                          "from the terminal"], env=env, cwd=home, capture_output=True,
                         text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
    drv = start_app()
    sidebar = drv.window.sidebar
    assert sidebar.ids() == [1]
    assert sidebar.list.item(0).text() == "from the terminal"
    assert sidebar.list.item(0).data(COMMAND_LINE_ROLE) is True  # drawn with its badge
    assert "command line" in sidebar.list.item(0).data(Qt.ItemDataRole.AccessibleTextRole)
    assert drv.pane.conversation_id == 1  # the newest chat opens, with its stored turn
    [turn] = drv.app.store.turns(1)
    assert turn.status == "completed" and turn.prompt == "from the terminal"


def test_a_window_started_while_tolaria_run_streams_does_not_interrupt_it(
        start_app: StartApp, home: Path, qtbot: QtBot) -> None:
    """The window's start-up crash recovery asks the other Tolaria processes first: a turn that
    `tolaria run` is streaming right now stays running, and ends as it really ends."""
    env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    env.update(PYTHONPATH=str(ROOT), TOLARIA_DEMO_TOOL_SECONDS="120")
    run = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--agent", "demo",
                            "long one from the terminal"], env=env, cwd=home,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        listing: list[str] = []

        def streaming() -> bool:
            listing[:] = subprocess.run(
                [sys.executable, "-m", "tolaria", "streams"], env=env, cwd=home,
                capture_output=True, text=True, timeout=30, check=False).stdout.split()
            return any(word.startswith("ai-agent-stream-") for word in listing)

        qtbot.waitUntil(streaming, timeout=30_000)
        drv = start_app()
        [turn] = drv.app.store.turns(1)
        assert turn.status == "running", "the live turn of `tolaria run` was marked interrupted"
        run.send_signal(signal.SIGTERM)  # stops its run the way Stop does
        assert run.wait(30) == 130
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(10)
