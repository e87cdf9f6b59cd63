"""One index per folder, kept between pickers and refreshed when the folder may have changed.

``get`` answers at once with what is known (possibly stale); ``load`` (on a worker thread) lists
the folder again. An index is stale after ``MAX_AGE_S``, or as soon as the folder's own mtime
or git's index file changed (a file added at the top, a ``git add`` or checkout).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from tolaria.chats.mentions.listing import Listing, list_folder
from tolaria.chats.mentions.matcher import MentionIndex
from tolaria.core.checkpoints.gitrun import Cancel

MAX_AGE_S = 30.0
#: Folders remembered at once (the least recently used goes first).
MAX_FOLDERS = 8


@dataclass(frozen=True)
class Indexed:
    listing: Listing
    index: MentionIndex
    built_at: float
    stamp: tuple[int, int]


def _stamp(root: str) -> tuple[int, int]:
    """The folder's mtime and its git index's (0 where missing)."""
    def mtime(path: str) -> int:
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return 0
    return mtime(root), mtime(os.path.join(root, ".git", "index"))


class IndexCache:
    """Thread-safe: the window reads it, workers fill it."""

    def __init__(self, max_age_s: float = MAX_AGE_S) -> None:
        self._max_age_s = max_age_s
        self._known: dict[str, Indexed] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(root: str) -> str:
        return os.path.realpath(root)

    def get(self, root: str) -> Indexed | None:
        with self._lock:
            return self._known.get(self.key(root))

    def is_fresh(self, root: str) -> bool:
        known = self.get(root)
        return (known is not None and time.monotonic() - known.built_at < self._max_age_s
                and known.stamp == _stamp(self.key(root)))

    def invalidate(self, root: str) -> None:
        with self._lock:
            self._known.pop(self.key(root), None)

    def load(self, root: str, cancel: Cancel | None = None) -> Indexed:
        """List ``root`` and index it (blocking: call it off the window's thread)."""
        key = self.key(root)
        stamp = _stamp(key)
        listing = list_folder(key, cancel)
        indexed = Indexed(listing, MentionIndex(listing.files, listing.folders),
                          time.monotonic(), stamp)
        return self._keep(key, indexed)

    def _keep(self, key: str, indexed: Indexed) -> Indexed:
        with self._lock:
            self._known.pop(key, None)
            self._known[key] = indexed
            while len(self._known) > MAX_FOLDERS:
                del self._known[next(iter(self._known))]
        return indexed
