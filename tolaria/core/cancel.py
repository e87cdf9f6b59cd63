"""A cancellation token that can be flipped from any thread and from another process.

The flag lives in a one-byte block of shared memory (``multiprocessing`` shared ctypes), so a
token handed to a worker process (as an argument of ``multiprocessing.Process``, with the
``fork`` or the ``spawn`` start method) is the *same* flag there: cancel it in the worker and the
owner sees it, or the other way round. Setting or clearing one byte is atomic, so no lock is
needed (and a lock would tie the token to one start method).

Like every shared ctypes object it can only be pickled while a process is being started: pass it
to ``Process(args=...)`` / ``Pool(initargs=...)``, not through a ``Queue``.
See docs/adr/0005-direct-model-chats.md.
"""

from __future__ import annotations

import ctypes
import multiprocessing
from typing import Any


class Cancelled(Exception):
    """Raised by ``CancellationToken.raise_if_cancelled`` once the token is cancelled."""


class CancellationToken:
    """``cancel()`` / ``cancelled`` / ``reset()``; shareable with threads and worker processes."""

    __slots__ = ("_flag",)

    def __init__(self) -> None:
        self._flag: Any = multiprocessing.RawValue(ctypes.c_byte, 0)

    def cancel(self) -> None:
        """Request cancellation. Idempotent; safe from any thread or process sharing the token."""
        self._flag.value = 1

    @property
    def cancelled(self) -> bool:
        return bool(self._flag.value)

    def reset(self) -> None:
        """Clear the flag: only for the token's owner, when it starts a new cancel scope."""
        self._flag.value = 0

    def raise_if_cancelled(self) -> None:
        if self._flag.value:
            raise Cancelled("cancelled")

    def __getstate__(self) -> dict[str, Any]:
        return {"_flag": self._flag}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._flag = state["_flag"]

    def __repr__(self) -> str:
        return f"CancellationToken(cancelled={self.cancelled})"
