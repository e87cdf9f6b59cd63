"""``@`` in a chat whose folder is on a host (ADR 0035, "@-mentions on a host").

The folder is listed there in one ssh round trip (core/remote/hostfiles.py) with this machine's
rules (listing.py: the heavy folders, the walk's bounds, git's listing) and indexed here like a
local folder. The cache is the local one's (cache.py), keyed by a *where*: the host and the
folder in one string that is never a local path (a NUL between them). An index is fresh for the
same ``MAX_AGE_S``; then the next ``@`` lists again, and the host answers "unchanged" in a few
bytes when the folder's mtime and git's index are what they were (the local cache's stamp).

What is known here is also what a turn's request uses: a mention is rewritten for the agent
(forms.py) only when the listing has its path, an ACP resource link made only for a listed
file; nothing local is read for a path that lives on the host.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass, replace

from tolaria.chats.mentions.cache import MAX_AGE_S, IndexCache, Indexed
from tolaria.chats.mentions.forms import find_mentions, render_mentions
from tolaria.chats.mentions.listing import (
    HEAVY_FOLDERS,
    WALK_LIMIT,
    WALK_SECONDS,
    Listing,
    folders_of,
)
from tolaria.chats.mentions.matcher import MentionIndex
from tolaria.core.checkpoints.gitrun import SAFE_CONFIG
from tolaria.core.remote.hostcall import CancelFlag, HostError
from tolaria.core.remote.hostfiles import LIST_TIMEOUT_S, list_host_files
from tolaria.core.remote.hosts import Target

_SEP = "\0"


def hosted_where(host: str, folder: str) -> str:
    """The cache's key of ``folder`` on ``host``."""
    return f"{host}{_SEP}{folder}"


def split_where(where: str) -> tuple[str, str] | None:
    """(host, folder) of a hosted where; None for a local folder."""
    host, sep, folder = where.partition(_SEP)
    return (host, folder) if sep else None


class HostedIndexCache(IndexCache):
    """Indexes of folders on hosts, by where (thread-safe like the local cache)."""

    @staticmethod
    def key(root: str) -> str:
        return root

    def is_fresh(self, root: str) -> bool:
        known = self.get(root)
        return known is not None and time.monotonic() - known.built_at < self._max_age_s

    def load_from(self, target: Target, where: str, cancel: CancelFlag | None = None, *,
                  timeout: float = LIST_TIMEOUT_S) -> Indexed:
        """List the where's folder on ``target`` and index it (blocking: off the window's
        thread). HostError (one line) when it cannot, Cancelled when ``cancel`` was set."""
        split = split_where(where)
        if split is None:
            raise ValueError(f"{where!r} is not a folder on a host")
        folder = split[1]
        known = self.get(where)
        got = list_host_files(target, folder, heavy=HEAVY_FOLDERS, limit=WALK_LIMIT,
                              seconds=WALK_SECONDS, safe=SAFE_CONFIG, timeout=timeout,
                              stamp=known.stamp if known is not None else None, cancel=cancel)
        if got.unchanged and known is not None:
            return self._keep(where, replace(known, built_at=time.monotonic()))
        folders = got.folders if got.source == "walk" else folders_of(got.files)
        listing = Listing(got.folder or folder, got.files, folders, got.source, got.truncated)
        return self._keep(where, Indexed(listing, MentionIndex(listing.files, listing.folders),
                                         time.monotonic(), got.stamp))


@dataclass(frozen=True)
class HostedMentions:
    """What a turn's request knows of a hosted folder's paths (from its listing)."""

    indexed: Indexed | None

    def exists(self, path: str) -> bool:
        return self.indexed is not None and self.indexed.index.has(path)

    def file(self, path: str) -> str | None:
        """The host's absolute path of a listed file (for an ACP resource link), else None."""
        if self.indexed is None or path not in self.indexed.listing.files:
            return None
        return posixpath.join(self.indexed.listing.root, path)


_shared = HostedIndexCache(MAX_AGE_S)


def shared_hosted() -> HostedIndexCache:
    """The process's cache of hosted folders (the window's picker fills it, the engine's
    request building reads it)."""
    return _shared


def hosted_mentions(host: str, folder: str) -> HostedMentions:
    return HostedMentions(shared_hosted().get(hosted_where(host, folder)))


def render_on_host(prompt: str, protocol: str, folder: str,
                   hosted: HostedMentions) -> tuple[str, tuple[str, ...]]:
    """The prompt and the ACP resource links of a turn whose folder is on a host: the host's
    paths, from what its listing says is there."""
    links: tuple[str, ...] = ()
    if protocol == "acp":
        links = tuple(dict.fromkeys(
            full for m in find_mentions(prompt, folder, hosted.exists)
            if (full := hosted.file(m.path)) is not None))
    return render_mentions(prompt, protocol, folder, hosted.exists), links


def listed_for(target: Target, folder: str, prompt: str) -> HostedMentions:
    """For ``tolaria run --host``: the folder listed there (one round trip) when ``prompt``
    holds something that may be a mention, else nothing known. A host that cannot be reached
    leaves the prompt as typed (the run itself then says why)."""
    if not folder or not find_mentions(prompt, folder, lambda _path: True):
        return HostedMentions(None)
    try:
        return HostedMentions(HostedIndexCache().load_from(target,
                                                           hosted_where(target.label, folder)))
    except HostError:
        return HostedMentions(None)
