"""The asyncio loop that is Qt's event loop (qasync), for the app and for the tests.

Python 3.11 has no ``loop_factory`` for ``asyncio.run``; ``qasync.run`` installs a policy that
makes one, so ``run`` below is the 3.11 and 3.12+ spelling at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

import qasync
import shiboken6
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on a qasync loop owned by the (already created) QApplication."""
    if QApplication.instance() is None:
        raise RuntimeError("create the QApplication before running the loop")
    if sys.version_info >= (3, 12):
        return asyncio.run(main, loop_factory=qasync.QEventLoop)
    result: T = qasync.run(main)
    return result


def attach_running_loop(app: QApplication) -> asyncio.AbstractEventLoop:
    """Tests: a qasync loop marked as running, driven by whoever spins Qt (``qtbot.wait*``).

    Undo with ``detach_loop``; never ``loop.stop()``: it calls ``QApplication.exit()``, which
    makes every later ``qtbot.wait*`` time out.
    """
    loop: asyncio.AbstractEventLoop = qasync.QEventLoop(app, already_running=True)
    return loop


def detach_loop(loop: asyncio.AbstractEventLoop, app: QApplication) -> None:
    """Undo ``attach_running_loop``: unmark the loop as running and close it (no app.exit())."""
    after = getattr(loop, "_after_run_forever", None)
    if after is not None:
        with contextlib.suppress(RuntimeError, TypeError):
            app.aboutToQuit.disconnect(after)
        after()
    asyncio.events._set_running_loop(None)
    # qasync keeps its running flag name-mangled; clear it so close() accepts the loop.
    loop._QEventLoop__is_running = False  # type: ignore[attr-defined]
    loop.close()
    _destroy_qt_parts(loop)


def _destroy_qt_parts(loop: asyncio.AbstractEventLoop) -> None:
    """Kill the closed loop's pending Qt timers and delete its QObjects, here and now.

    qasync's ``close()`` only flags its timer object as stopped: its pending timers stay
    registered with the GUI thread. The loop sits in reference cycles, so Python's cyclic
    garbage collector may free it later on *any* thread (the store's flusher, a child watcher);
    a QObject deleted on a foreign thread cannot unregister its timers, and the next one to fire
    crashes Qt (SIGSEGV in QCoreApplication::notifyInternal2). Deleting them here, on the GUI
    thread, makes that impossible.
    """
    timer = getattr(loop, "_timer", None)
    if isinstance(timer, QObject) and shiboken6.isValid(timer):
        callbacks = getattr(timer, "_SimpleTimer__callbacks", {})
        for timer_id in list(callbacks):
            timer.killTimer(timer_id)
        callbacks.clear()
        shiboken6.delete(timer)
    signaller = getattr(loop, "_QEventLoop__call_soon_signaller", None)
    if isinstance(signaller, QObject) and shiboken6.isValid(signaller):
        shiboken6.delete(signaller)
