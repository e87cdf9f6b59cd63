"""A chat's "keep running when disconnected" in the window (ADR 0032): offered in the Host menu
once the chat is on a host, stored with the chat, shown checked again when the chat is
reopened; a chat on this computer has nothing to keep. Picture: ``TOLARIA_DOCS_SHOTS=1``
(docs/chat-keep-running.png)."""

from __future__ import annotations

import contextlib
import functools
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
from helpers import cli_env
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, processes_of, save_shot

from tolaria.core.events import TextDelta
from tolaria.core.stream_id import new_stream_id
from tolaria.ui.chat.header import ChatHeader

StartApp = Callable[..., AppDriver]
KEEP = "Keep running when disconnected"


def _menu(header: ChatHeader) -> dict[str, bool]:
    menu = header.host_button.menu()
    menu.aboutToShow.emit()
    return {a.text(): a.isChecked() for a in menu.actions() if a.text()}


def _pick(header: ChatHeader, text: str) -> None:
    menu = header.host_button.menu()
    menu.aboutToShow.emit()
    [action] = [a for a in menu.actions() if a.text() == text]
    action.trigger()


def test_keep_running_is_a_choice_of_a_chat_on_a_host(start_app: StartApp, home: Path,
                                                      tmp_path: Path, qtbot: QtBot) -> None:
    (home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\n')
    drv = start_app()
    header, chat = drv.window.header, drv.pane.conversation_id
    assert KEEP not in _menu(header), "nothing to keep on this computer"
    _pick(header, "box")
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == "box")
    assert _menu(header)[KEEP] is False
    _pick(header, KEEP)
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).keep_running)
    assert _menu(header)[KEEP] is True
    header.host_button.menu().aboutToShow.emit()
    save_shot(header, tmp_path, "chat-keep-running.png")

    other = drv.app.controller.new_conversation("demo", str(tmp_path))
    drv.window.open_conversation(other.id)
    qtbot.waitUntil(lambda: drv.pane.conversation_id == other.id)
    assert KEEP not in _menu(header)
    drv.window.open_conversation(chat)
    qtbot.waitUntil(lambda: drv.pane.conversation_id == chat)
    assert _menu(header)[KEEP] is True, "kept with the chat"
    _pick(header, KEEP)
    qtbot.waitUntil(lambda: not drv.stored_conversation(chat).keep_running)


def test_the_window_takes_back_a_kept_turn_at_its_start(start_app: StartApp, home: Path,
                                                        tmp_path: Path, qtbot: QtBot) -> None:
    """A kept turn on a host whose Tolaria was killed with -9 (here a ``tolaria run
    --keep-running``): the window's start reattaches it - the chat shows it running, its output
    replayed - and Stop ends the tree there, 0 survivors."""
    (home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\n')
    sid = new_stream_id()
    first = subprocess.Popen(
        [sys.executable, "-m", "tolaria", "run", "--host", "box", "--keep-running", "--agent",
         "demo", "--stream-id", sid, "run a long tool"],
        env=cli_env(home, TOLARIA_DEMO_TOOL_SECONDS="60"), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        qtbot.waitUntil(lambda: any("sleep" in _cmdline(p) for p in processes_of(sid)),
                        timeout=30_000)
        # Tolaria killed with -9 mid-turn. Its watchdog first: it would end every process that
        # carries the run's marker, which here (the "host" is this machine) is the kept run too;
        # on another machine it cannot reach them.
        for child in psutil.Process(first.pid).children():
            if "watchdog" in " ".join(child.cmdline()):
                child.kill()
                qtbot.waitUntil(functools.partial(_gone, child), timeout=10_000)
        first.kill()
        first.wait()
        qtbot.waitUntil(lambda: not any("tolaria.core.remote.link" in _cmdline(p)
                                        for p in processes_of(sid)), timeout=15_000)
        assert any("sleep" in _cmdline(p) for p in processes_of(sid)), "the kept run went on"
        drv = start_app()
        [chat] = [c for c in drv.app.store.list_conversations() if c.keep_running]
        drv.window.open_conversation(chat.id)
        qtbot.waitUntil(lambda: drv.pane.running_stream == sid, timeout=15_000)
        qtbot.waitUntil(lambda: bool(drv.last_turn().text()), timeout=15_000)  # replayed
        drv.button("stopButton").click()
        turn = drv.wait_finished()
        assert turn.status == "cancelled"
        stored = drv.app.store.events(drv.stored_turn(sid).id)
        text = "".join(e.text for e in stored if isinstance(e, TextDelta))
        assert text and text.count(text[:20]) == 1, f"replayed once: {text!r}"
        assert text[:20] in turn.text(), (text, turn.text())
        with contextlib.suppress(Exception):
            qtbot.waitUntil(lambda: processes_of(sid) == [], timeout=15_000)
        left = [(p.pid, _cmdline(p)[:100]) for p in processes_of(sid)]
        assert left == [], left
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        for proc in processes_of(sid):
            with contextlib.suppress(psutil.Error):
                proc.kill()


def _gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""
