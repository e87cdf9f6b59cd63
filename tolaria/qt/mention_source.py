"""The files a chat's folder offers to ``@``, listed off the window's thread (issue 26 item 3).

``request(root)`` answers at once from the cache (``IndexCache``, chats/mentions/cache.py) and,
when that is missing or stale, lists the folder on a worker thread; ``indexed`` arrives (queued
to the window's thread) when it is done. One listing per folder runs at a time; ``shutdown``
cancels them (git is killed). One source serves every composer of the process, so a folder is
listed once however many chats use it.
"""

from __future__ import annotations

import logging
import threading

from PySide6.QtCore import QObject, Signal

from tolaria.chats.mentions.cache import IndexCache, Indexed
from tolaria.core.checkpoints.gitrun import Cancel, CheckpointCancelled

log = logging.getLogger(__name__)


class MentionSource(QObject):
    #: A folder was listed: its path (as asked), the Indexed.
    indexed = Signal(str, object)
    #: A folder could not be listed: its path, why.
    failed = Signal(str, str)

    def __init__(self, cache: IndexCache | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.cache = cache or IndexCache()
        self._running: dict[str, tuple[threading.Thread, Cancel]] = {}
        self._lock = threading.Lock()

    def request(self, root: str) -> Indexed | None:
        """What is known of ``root`` now (maybe stale: then a fresh listing is on its way)."""
        known = self.cache.get(root)
        if known is None or not self.cache.is_fresh(root):
            self._start(root)
        return known

    def busy(self, root: str) -> bool:
        with self._lock:
            return root in self._running

    def _start(self, root: str) -> None:
        with self._lock:
            if root in self._running:
                return
            cancel = Cancel()
            thread = threading.Thread(target=self._list, args=(root, cancel),
                                      name="tolaria-mentions", daemon=True)
            self._running[root] = (thread, cancel)
        thread.start()

    def _list(self, root: str, cancel: Cancel) -> None:
        try:
            indexed = self.cache.load(root, cancel)
        except CheckpointCancelled:
            self._finish(root)
            return
        except Exception as exc:  # OSError, git's own; a bug must not kill the thread silently
            if not isinstance(exc, (OSError, ValueError)):
                log.exception("listing %s for @-mentions failed", root)
            self._finish(root)
            self.failed.emit(root, f"Cannot list {root}: {exc}")
            return
        self._finish(root)
        self.indexed.emit(root, indexed)

    def _finish(self, root: str) -> None:
        with self._lock:
            self._running.pop(root, None)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Cancel every listing and wait for its thread (git killed, nothing left running)."""
        with self._lock:
            running = list(self._running.values())
        for _, cancel in running:
            cancel.set()
        for thread, _ in running:
            thread.join(timeout)


_shared: MentionSource | None = None


def shared_source() -> MentionSource:
    """The process's source (created on first use, on the window's thread)."""
    global _shared
    if _shared is None:
        _shared = MentionSource()
    return _shared
