"""Quitting the window with a kept run (ADR 0032, "Quit"): the quit box says that the chat
keeping its run on its host goes on there (and asks a plain "Quit?" when only such runs are
live); the quit stops the other runs and leaves the kept one running, its turn stored as
running; the next start takes it back and its Stop ends it, 0 processes left.

The "host" is a command target on this machine (``env``), as in test_chat_keep_running.py.
Pictures: ``TOLARIA_DOCS_SHOTS=1`` (docs/quit-keep-running.png, docs/quit-only-kept.png).
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from PySide6.QtWidgets import QMessageBox, QPushButton
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, processes_of, save_shot

from tolaria.ui.window.quit_prompt import kept_sentence, only_kept_info, stopped_sentence

StartApp = Callable[..., AppDriver]


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def _tool(sid: str) -> bool:
    return any("sleep" in _cmdline(p) for p in processes_of(sid))


def _links(sid: str) -> list[psutil.Process]:
    return [p for p in processes_of(sid) if "tolaria.core.remote.link" in _cmdline(p)]


def test_quit_names_the_kept_run_leaves_it_running_and_the_next_start_takes_it_back(
        start_app: StartApp, home: Path, tmp_path: Path, qtbot: QtBot,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    (home / "settings.toml").write_text(
        f'[hosts."devbox"]\ncommand = "env"\npython = "{sys.executable}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\n')
    drv = start_app()
    window, controller = drv.window, drv.app.controller
    plain_chat, plain = drv.pane.conversation_id, drv.send("busy here")
    kept_chat = controller.new_conversation("demo", "", host="devbox")
    controller.set_keep_running(kept_chat.id, True)
    window.open_conversation(kept_chat.id)
    qtbot.waitUntil(lambda: drv.pane.conversation_id == kept_chat.id)
    kept = drv.send("busy there")
    kept_pane = drv.pane
    sids: tuple[str, ...] = (plain, kept)
    try:
        qtbot.waitUntil(lambda: _tool(kept) and _tool(plain), timeout=30_000)
        qtbot.waitUntil(lambda: bool(drv.last_turn(kept_pane).text()), timeout=15_000)

        window.close()
        box = window.findChild(QMessageBox, "quitDialog")
        assert box is not None and box.isVisible()
        assert box.text() == "1 chat is still running. Stop and quit?"
        assert box.informativeText() == (
            "Its agent and the processes it started are stopped. 1 more keeps running on "
            "devbox and is taken back at the next start.")
        quit_button = box.findChild(QPushButton, "quitConfirmButton")
        assert quit_button is not None and quit_button.text() == "Stop and Quit"
        assert box.defaultButton() is box.button(QMessageBox.StandardButton.Cancel)
        save_shot(box, tmp_path, "quit-keep-running.png")

        controller.stop(plain_chat)  # the plain chat ends while it is open
        qtbot.waitUntil(lambda: box.text().startswith("Quit?"), timeout=15_000)
        assert box.text() == "Quit? 1 chat keeps running on devbox."
        assert box.informativeText() == ("It is taken back at the next start; stop it first "
                                         "to end it there.")
        assert quit_button.text() == "Quit" and box.defaultButton() is quit_button
        save_shot(box, tmp_path, "quit-only-kept.png")
        assert processes_of(plain) == []

        quit_button.click()
        qtbot.waitUntil(lambda: not window.isVisible())
        drv.close()  # the app's own shutdown, as after the window closed
        assert _tool(kept), "the kept run was stopped by the quit"
        assert _links(kept) == [], "the kept run's link outlived the quit"
        with sqlite3.connect(drv.app.store.path) as db:
            stored = dict(db.execute("SELECT stream_id, status FROM turns").fetchall())
        assert stored[kept] == "running" and stored[plain] == "cancelled", stored

        again = start_app()
        again.window.open_conversation(kept_chat.id)
        qtbot.waitUntil(lambda: again.pane.running_stream == kept, timeout=15_000)
        qtbot.waitUntil(lambda: bool(again.last_turn().text()), timeout=15_000)  # replayed
        again.button("stopButton").click()
        turn = again.wait_finished()
        assert turn.status == "cancelled"
        with contextlib.suppress(Exception):
            qtbot.waitUntil(lambda: processes_of(kept) == [], timeout=15_000)
        left = [(p.pid, _cmdline(p)[:100]) for p in processes_of(kept)]
        assert left == [], left
    finally:
        for sid in sids:
            for proc in processes_of(sid):
                with contextlib.suppress(psutil.Error):
                    proc.kill()


def test_the_quit_sentences_count_runs_and_hosts() -> None:
    assert kept_sentence(["devbox"], more=True) == (
        "1 more keeps running on devbox and is taken back at the next start.")
    assert kept_sentence(["gpu", "devbox", "gpu"], more=True) == (
        "3 more keep running on devbox and gpu and are taken back at the next start.")
    assert kept_sentence(["a", "b", "c", "d"], more=False) == "4 chats keep running on 4 hosts."
    assert stopped_sentence(2) == "Their agents and the processes they started are stopped."
    assert only_kept_info(2) == ("They are taken back at the next start; stop them first to "
                                 "end them there.")
