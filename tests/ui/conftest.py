"""UI tests: synchronous, driven by ``qtbot.wait*`` over a qasync loop marked as running.

Rules (STYLE.md): never call ``qtbot.wait*`` inside a coroutine; never let teardown call
``loop.stop()`` (it would ``QApplication.exit()`` and every later wait would time out); every test
stops its runs (``app.shutdown()`` in the fixture's teardown waits until their trees are gone).
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver

from tolaria.app.main import Tolaria, make_qapplication
from tolaria.qt.compat import protect_singletons
from tolaria.qt.loop import attach_running_loop, detach_loop

protect_singletons()  # before any Qt call: see tolaria/qt/compat.py

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.qt_log_level_fail("WARNING"))
            # The offscreen platform's own limits (size hints, raise(), keyboard grabs of popups).
            item.add_marker(pytest.mark.qt_log_ignore(
                r"^This plugin does not support (propagateSizeHints\(\)|raise\(\)|"
                r"grabbing the keyboard|grabbing the mouse)$"))


@pytest.fixture(autouse=True)
def _fast_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short demo runs unless a test asks otherwise."""
    monkeypatch.setenv("TOLARIA_DEMO_DELAY", "0.001")
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")


@pytest.fixture(autouse=True)
def _no_desktop_bus(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test notifies the developer's own desktop: a test that wants a session bus starts
    one of its own (tests/dbushelpers.py ``session_bus``)."""
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)


@pytest.fixture(autouse=True)
def _own_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chats work in a folder of the test's own (the default folder is the current one): a turn
    in a git folder is snapshotted into its refs, and the project's repository is not ours."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)


@pytest.fixture
def qloop(qapp: QApplication) -> Iterator[asyncio.AbstractEventLoop]:
    make_qapplication()
    loop = attach_running_loop(qapp)
    yield loop
    detach_loop(loop, qapp)
    # Collect this test's garbage now, on the GUI thread: a QObject freed by the cyclic GC on
    # another thread (the store's flusher, a child watcher) could not unregister its timers.
    gc.collect()


@pytest.fixture
def start_app(qtbot: QtBot, qloop: asyncio.AbstractEventLoop
              ) -> Iterator[Callable[..., AppDriver]]:
    drivers: list[AppDriver] = []

    def start(**kwargs: Any) -> AppDriver:
        app = Tolaria(grace_s=kwargs.pop("grace_s", 1.0), **kwargs)
        driver = AppDriver(qtbot, qloop, app)
        drivers.append(driver)
        driver.run(app.start())
        qtbot.waitExposed(app.window)
        # Window shortcuts (Esc, Ctrl+N) act only in the active window.
        app.window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is app.window)
        return driver

    yield start
    for driver in drivers:
        driver.close()


@pytest.fixture
def home() -> Path:
    return Path(os.environ["TOLARIA_HOME"])
