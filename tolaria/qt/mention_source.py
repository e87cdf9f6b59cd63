"""The files a chat's folder offers to ``@``, listed off the window's thread (issue 26 item 3).

``request(root)`` answers at once from the cache (``IndexCache``, chats/mentions/cache.py) and,
when that is missing or stale, lists the folder on a worker thread; ``indexed`` arrives (queued
to the window's thread) when it is done. One listing per folder runs at a time; ``shutdown``
cancels them (git is killed). One source serves every composer of the process, so a folder is
listed once however many chats use it.

A folder on a host is asked for by its *where* (chats/mentions/hosted.py: host and folder): it
is listed there in one ssh round trip on the same kind of worker thread, with a time limit;
ssh's questions go to the window's askpass when it set ``askpass`` (ADR 0033). A host that
could not be reached is not asked again for ``RETRY_AFTER_S`` (each keystroke would be a
connection); its one-line reason is ``failed``'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from tolaria.chats.mentions.cache import IndexCache, Indexed
from tolaria.chats.mentions.hosted import HostedIndexCache, shared_hosted, split_where
from tolaria.config.remote_hosts import load_target
from tolaria.core.checkpoints.gitrun import Cancel, CheckpointCancelled
from tolaria.core.remote.askpass_desk import DEFAULT_TIMEOUT_S
from tolaria.core.remote.hostcall import Cancelled, HostError
from tolaria.core.remote.hostfiles import LIST_TIMEOUT_S
from tolaria.core.remote.hosts import BadDestination, Target
from tolaria.qt.askpass_control import EnvFor, asking

log = logging.getLogger(__name__)

#: Seconds before a host that could not be reached is asked again.
RETRY_AFTER_S = 10.0


class MentionSource(QObject):
    #: A folder was listed: its path (as asked), the Indexed.
    indexed = Signal(str, object)
    #: A folder could not be listed: its path, why.
    failed = Signal(str, str)

    def __init__(self, cache: IndexCache | None = None, parent: QObject | None = None, *,
                 hosted: HostedIndexCache | None = None) -> None:
        super().__init__(parent)
        self.cache = cache or IndexCache()
        self.hosted = hosted or shared_hosted()
        self._running: dict[str, tuple[threading.Thread, Cancel]] = {}
        self._lock = threading.Lock()
        #: Hosted where -> when it last failed (not asked again before RETRY_AFTER_S).
        self._failed_at: dict[str, float] = {}
        #: The window's askpass (``AskpassControl.env_for``: conversation id, ssh command,
        #: host). None: BatchMode (ssh refuses its questions, its reason is shown).
        self.askpass: EnvFor | None = None
        #: Which chat asks (its card shows ssh's question), by host; 0: a dialog.
        self.asker: Callable[[str], int] = lambda _host: 0

    def request(self, root: str) -> Indexed | None:
        """What is known of ``root`` (a local folder or a hosted where) now (maybe stale: then
        a fresh listing is on its way)."""
        cache = self._cache_of(root)
        known = cache.get(root)
        if known is None or not cache.is_fresh(root):
            failed = self._failed_at.get(root)
            if failed is None or time.monotonic() - failed >= RETRY_AFTER_S:
                self._start(root)
        return known

    def known(self, root: str) -> Indexed | None:
        """What is known of ``root`` (nothing is listed)."""
        return self._cache_of(root).get(root)

    def _cache_of(self, root: str) -> IndexCache:
        return self.hosted if split_where(root) is not None else self.cache

    def busy(self, root: str) -> bool:
        with self._lock:
            return root in self._running

    def _start(self, root: str) -> None:
        with self._lock:
            if root in self._running:
                return
            cancel = Cancel()
            split = split_where(root)
            if split is None:
                thread = threading.Thread(target=self._list, args=(root, cancel),
                                          name="tolaria-mentions", daemon=True)
            else:
                reach = self._target(split[0])
                thread = threading.Thread(target=self._list_hosted, args=(root, reach, cancel),
                                          name="tolaria-mentions-host", daemon=True)
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

    def _target(self, host: str) -> tuple[Target, float] | str:
        """How to reach ``host`` (with the window's askpass where it can ask) and the time
        limit, or why it cannot be reached (on the window's thread: the askpass desk's)."""
        try:
            target = load_target(host)
        except BadDestination as exc:
            return str(exc)
        target, asks = asking(target, self.askpass, self.asker(host), host)
        # ssh may wait for the user's answer: the listing waits as long.
        return target, LIST_TIMEOUT_S + (DEFAULT_TIMEOUT_S if asks else 0)

    def _list_hosted(self, where: str, reach: tuple[Target, float] | str,
                     cancel: Cancel) -> None:
        host = (split_where(where) or (where, ""))[0]
        try:
            if isinstance(reach, str):
                raise HostError(reach)
            target, timeout = reach
            indexed = self.hosted.load_from(target, where, cancel, timeout=timeout)
        except Cancelled:
            self._finish(where)
            return
        except Exception as exc:  # HostError's one line; a bug must not kill the thread silently
            if not isinstance(exc, HostError):
                log.exception("listing %r for @-mentions failed", where)
            said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            label = reach[0].label if not isinstance(reach, str) else host
            said = said.removeprefix(f"{label}: ")
            self._failed_at[where] = time.monotonic()
            self._finish(where)
            self.failed.emit(where, f"Cannot list files on {host}: {said}")
            return
        self._failed_at.pop(where, None)
        self._finish(where)
        self.indexed.emit(where, indexed)

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
