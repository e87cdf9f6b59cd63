"""Why the store's writes fail, kept for the window and the CLI to report, and who is told.

A write that fails for want of room or rights (a full disk, a lock held too long) is not an
exception the caller sees: the buffered events stay in memory and the flusher retries them, so
the failure has to be remembered and announced instead. ``WriteErrors`` is the part of ``Store``
that does that: ``write_error`` holds the one-line reason until everything is saved again, and
``write_listener`` (the window's bridge) hears each change once, not at every retry.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("tolaria.core.store.db")  # the store's logger, as before the split

#: Failures of a write that a retry may cure (a full disk, a lock held too long).
WRITE_ERRORS = (sqlite3.Error, OSError)


class WriteErrors:
    """Mixed into ``Store``, which provides ``path`` (named in the message)."""

    path: Path
    #: Why buffered events could not be written (one line, e.g. "disk full: could not save
    #: the turn to PATH"); None once everything buffered is saved. See ``_write_failed``.
    write_error: str | None = None
    #: Told why writes fail (``"disk full"``, SQLite's words) when that changes, and None
    #: once everything is saved again; called from the flusher thread too, so it must only
    #: hand the news on (the window's bridge emits a queued signal).
    write_listener: Callable[[str | None], None] | None = None

    def _write_failed(self, exc: BaseException) -> None:
        """Remember why a write failed, and log it once (not at every retry of the flusher)."""
        full = (getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
                or getattr(exc, "errno", None) == errno.ENOSPC or "disk is full" in str(exc))
        message = (f"disk full: could not save the turn to {self.path}" if full
                   else f"could not save the turn to {self.path}: {exc}")
        if message == self.write_error:
            return
        log.warning("%s", message)
        self.write_error = message
        self._tell_listener("disk full" if full else str(exc))

    def _writes_work(self) -> None:
        """Everything buffered is saved (the disk has room again)."""
        if self.write_error is not None:
            self.write_error = None
            self._tell_listener(None)

    def _tell_listener(self, reason: str | None) -> None:
        listener = self.write_listener
        if listener is not None:
            try:
                listener(reason)
            except Exception:  # the store keeps saving whatever a listener does
                log.exception("write listener failed")
