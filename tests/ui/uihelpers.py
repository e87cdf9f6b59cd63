"""Helpers for the UI tests: drive a started Tolaria, find a run's processes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psutil
from helpers import fake_manifest, marker_pids, python_child
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel, QPushButton, QWidget
from pytestqt.qtbot import QtBot

from tolaria.app.main import Tolaria
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.store.schema import Conversation, Turn
from tolaria.ui.chat.chat_pane import ChatPane
from tolaria.ui.review.turn_changes import TurnChangesRow
from tolaria.ui.transcript.turn_view import TurnView
from tolaria.ui.window.main_window import MainWindow

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


def edit_turn(drv: AppDriver, prompt: str, edits: dict[str, str | None],
              hang: bool = False) -> str:
    """Send a turn to the fake agent that writes ``edits`` (path -> text, None deletes) in the
    chat's folder (and then hangs, with ``hang``); its stream id."""
    env = {"FAKE_EDITS": json.dumps(edits)}
    if hang:
        env["FAKE_EDIT_HANG"] = "1"
    drv.use_agent(fake_manifest("edit_files", env=env))
    return drv.send(prompt)


def row_of(drv: AppDriver, stream_id: str) -> TurnChangesRow:
    """The row of files under a turn, once it is there."""
    view = drv.pane.transcript.turn(stream_id)
    assert view is not None
    drv.qtbot.waitUntil(lambda: view.findChild(TurnChangesRow) is not None, timeout=10_000)
    row = view.findChild(TurnChangesRow)
    assert row is not None
    return row


def revert_button(row: TurnChangesRow, path: str) -> QPushButton:
    """The "Revert file" button of ``path``'s row in a turn's changes."""
    for file_row in row.file_rows():
        label = file_row.findChild(QLabel, "changedFilePath")
        if label is not None and label.text() == path:
            button = file_row.findChild(QPushButton, "revertFileButton")
            assert button is not None
            return button
    raise AssertionError(f"{path} is not listed")


_WINDOW_SCRIPT = """\
import sys
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from tolaria.app import main as app

started = app.Tolaria.start

async def start(self):
    await started(self)
    pane = self.window.current_pane()
{body}
    print(pane.running_stream, flush=True)

app.Tolaria.start = start
sys.exit(app.run({run_args}))
"""


def window_script(body: str, run_args: str = "") -> str:
    """A script of the real app (``tolaria.app.main.run(run_args)``): once started it runs
    ``body`` (code with ``self`` the app and ``pane`` its chat pane), then prints the pane's
    running stream id."""
    return _WINDOW_SCRIPT.format(body=textwrap.indent(textwrap.dedent(body), "    "),
                                 run_args=run_args)


@contextmanager
def window_process(script: str, *args: str, cwd: Path,
                   after: Callable[[str], None] | None = None,
                   **env: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The real app in a process of its own (offscreen, ``window_script``): yields it and the
    stream id it printed; killed at the end if it is still alive, then ``after(stream id)``
    (what the killed window's run left behind is the test's to end)."""
    environ = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    environ.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
                   QT_QPA_PLATFORM="offscreen", **env)
    stream_id = ""
    try:
        with python_child(script, *args, env=environ, cwd=cwd) as proc:
            assert proc.stdout is not None
            stream_id = proc.stdout.readline().strip()
            assert stream_id.startswith("ai-agent-stream-"), proc.communicate(timeout=30)[1]
            yield proc, stream_id
    finally:
        if after is not None:
            after(stream_id)
