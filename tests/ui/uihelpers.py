"""Helpers for the UI tests: drive a started Tolaria, find a run's processes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import psutil
from helpers import marker_pids
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QPushButton, QWidget
from pytestqt.qtbot import QtBot

from tolaria.app.main import Tolaria
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.store.schema import Conversation, Turn
from tolaria.ui.chat_pane import ChatPane
from tolaria.ui.main_window import MainWindow
from tolaria.ui.turn_view import TurnView

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
#: ``TOLARIA_DOCS_SHOTS=1``: the tests that take the docs' screenshots write them into docs/
#: (``save_shot``); otherwise into the test's own folder, so grabbing is still exercised.
DOCS_SHOTS = "TOLARIA_DOCS_SHOTS"


def save_shot(widget: QWidget, tmp_path: Path, name: str) -> Path:
    """Grab ``widget`` to ``name`` (a PNG) in docs/ or in ``tmp_path`` (``DOCS_SHOTS``)."""
    where = ROOT / "docs" if os.environ.get(DOCS_SHOTS) == "1" else tmp_path
    image = widget.grab()
    assert not image.isNull() and image.save(str(where / name))
    return where / name


def run_async(qtbot: QtBot, loop: asyncio.AbstractEventLoop,
              coro: Coroutine[Any, Any, T], timeout_ms: int = 15_000) -> T:
    """Run ``coro`` on the qasync loop while the test spins Qt (never wait inside a coroutine)."""
    task = loop.create_task(coro)
    qtbot.waitUntil(task.done, timeout=timeout_ms)
    return task.result()


class AppDriver:
    """A started Tolaria plus helpers; ``close`` runs the real shutdown path."""

    def __init__(self, qtbot: QtBot, loop: asyncio.AbstractEventLoop, app: Tolaria) -> None:
        self.qtbot = qtbot
        self.loop = loop
        self.app = app
        self.closed = False

    @property
    def window(self) -> MainWindow:
        return self.app.window

    @property
    def pane(self) -> ChatPane:
        pane = self.app.window.current_pane()
        assert pane is not None
        return pane

    def button(self, name: str, pane: ChatPane | None = None) -> QPushButton:
        found = (pane or self.pane).findChild(QPushButton, name)
        assert found is not None, f"no button {name!r}"
        return found

    def use_agent(self, manifest: Manifest) -> None:
        """Make ``manifest`` known (as a user adapter would be) and pick it for this chat."""
        self.app.adapters.manifests[manifest.id] = manifest
        self.window.set_manifests(list(self.app.adapters.manifests.values()))
        self.app.controller.set_agent(self.pane.conversation_id, manifest.id)

    def send(self, prompt: str, pane: ChatPane | None = None) -> str:
        pane = pane or self.pane
        pane.composer.setPlainText(prompt)
        self.button("sendButton", pane).click()
        assert pane.running_stream is not None
        return pane.running_stream

    def last_turn(self, pane: ChatPane | None = None) -> TurnView:
        return (pane or self.pane).turn_views()[-1]

    def wait_tool_running(self, stream_id: str, pane: ChatPane | None = None) -> None:
        """Until the demo's tool (a `sleep` in its own session) is really running."""
        def tool_alive() -> bool:
            return any("sleep" in " ".join(p.cmdline()) for p in processes_of(stream_id))
        self.qtbot.waitUntil(tool_alive, timeout=10_000)
        turn = (pane or self.pane).transcript.turn(stream_id)
        assert turn is not None
        self.qtbot.waitUntil(lambda: any(c.status == "running" for c in turn.tool_cards()),
                             timeout=5_000)

    def wait_finished(self, pane: ChatPane | None = None, timeout_ms: int = 15_000) -> TurnView:
        pane = pane or self.pane
        self.qtbot.waitUntil(lambda: pane.running_stream is None, timeout=timeout_ms)
        turn = pane.turn_views()[-1]
        self.qtbot.waitUntil(lambda: turn.status != "running" and not turn.busy,
                             timeout=timeout_ms)
        return turn

    def stored_turn(self, stream_id: str) -> Turn:
        """The store's row of this run, which must exist."""
        turn = self.app.store.turn_by_stream(stream_id)
        assert turn is not None, f"no stored turn for {stream_id}"
        return turn

    def stored_conversation(self, conversation_id: int) -> Conversation:
        """The store's row of this conversation, which must exist."""
        conversation = self.app.store.get_conversation(conversation_id)
        assert conversation is not None, f"no stored conversation {conversation_id}"
        return conversation

    def run(self, coro: Coroutine[Any, Any, T], timeout_ms: int = 15_000) -> T:
        return run_async(self.qtbot, self.loop, coro, timeout_ms)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.run(self.app.shutdown(), timeout_ms=30_000)
            self.app.window.deleteLater()


def processes_of(stream_id: str) -> list[psutil.Process]:
    """Live processes whose environment carries this run's TOLARIA_STREAM_ID (/proc scan)."""
    out = []
    for pid in marker_pids(stream_id):
        try:
            out.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return out


def assert_only_ctrl_period_stops(drv: AppDriver, prompt: str) -> None:
    """With the stop shortcut changed to Ctrl+.: a run of ``prompt`` (a long tool) ignores Esc in
    the composer, and Ctrl+. stops it with its whole tree."""
    stream_id = drv.send(prompt)
    drv.wait_tool_running(stream_id)
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Escape)
    assert drv.pane.running_stream == stream_id, "Esc is not the stop key any more"
    assert processes_of(stream_id)
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Period, Qt.KeyboardModifier.ControlModifier)
    turn = drv.wait_finished()
    assert turn.status == "cancelled"
    assert processes_of(stream_id) == []


#: The ``start_app`` fixture (tests/ui/conftest.py): starts a Tolaria (keyword arguments go to
#: ``Tolaria``) and returns its driver; the fixture's teardown closes every app it started.
StartApp = Callable[..., AppDriver]
