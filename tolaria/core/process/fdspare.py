"""One file descriptor kept aside for the stop path.

A process out of file descriptors (a flood of connections, a leak) must still be able to stop
its runs: finding a run's processes reads ``/proc`` (the linux backend directly, the portable
one through psutil, which also opens a file for a bare ``psutil.Process(pid)``), an fd at a
time. This module holds one spare fd (``/dev/null``, close-on-exec) from import on; a function
decorated with ``with_spare_fd`` that fails with EMFILE/ENFILE is retried once with the spare
released, and the spare is taken back right after. Only synchronous functions: nothing else can grab the
freed fd in between.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE)
_spare: int | None = None


def _take() -> None:
    global _spare
    if _spare is None:
        try:
            _spare = os.open(os.devnull, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            _spare = None


def _release() -> bool:
    global _spare
    if _spare is None:
        return False
    os.close(_spare)
    _spare = None
    return True


def with_spare_fd(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn``, retried once with the spare fd free when it runs out of file descriptors."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except OSError as exc:
            if exc.errno not in _OUT_OF_FDS or not _release():
                raise
        try:
            return fn(*args, **kwargs)
        finally:
            _take()

    return wrapper


_take()
