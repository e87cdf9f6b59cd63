"""The files of a folder on a host, for ``@`` (issue 26 item 3 on a host, ADR 0035): one ssh
round trip through Tolaria's git runner there (hostgit.py's ``files`` operation). Git's tracked
plus untracked-not-ignored files, else the bounded walk; the walk's rules (the heavy folders,
the entry and time bounds) come from the caller, so the host follows this machine's
(chats/mentions/listing.py). Names travel NUL-separated and compressed: a space, a newline or a
byte that is not UTF-8 survives. Blocking, with a time limit: callers run it off the GUI thread.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from tolaria.core.remote.hostcall import CancelFlag, HostError, b64decode, batch
from tolaria.core.remote.hosts import Target

#: Seconds one listing may take, the connection included (git there has its own limit).
LIST_TIMEOUT_S = 45.0
#: Bytes of names accepted from the host (beyond: the listing is cut and says so).
MOST_BYTES = 32 << 20


@dataclass(frozen=True)
class HostFiles:
    """One folder's listing there (``unchanged``: the folder's and git's index mtimes are the
    ``stamp`` asked about, nothing else is sent)."""

    files: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    #: ``"git"`` or ``"walk"``.
    source: str = "walk"
    truncated: bool = False
    stamp: tuple[int, int] = (0, 0)
    unchanged: bool = False
    #: The folder's absolute path there (a typed ``~/app`` expanded).
    folder: str = ""


def list_host_files(target: Target, folder: str, *, heavy: Collection[str], limit: int,
                    seconds: float, safe: Sequence[str] = (),
                    stamp: tuple[int, int] | None = None, timeout: float = LIST_TIMEOUT_S,
                    cancel: CancelFlag | None = None) -> HostFiles:
    """``folder`` (an absolute path on ``target``) listed there; HostError with one line when
    it cannot be (ssh's reason, not a folder, the time limit), Cancelled when ``cancel`` was
    set (ssh killed)."""
    op = {"op": "files", "folder": folder, "heavy": sorted(heavy), "limit": limit,
          "seconds": seconds, "most_bytes": MOST_BYTES,
          "stamp": list(stamp) if stamp is not None else None}
    results = batch(target, [op], safe, timeout=timeout, cancel=cancel)
    got = results[0] if results else {"error": "no answer"}
    if "error" in got:
        raise HostError(str(got["error"]))
    try:
        said = tuple(int(n) for n in got.get("stamp") or (0, 0))
        when = (said[0], said[1]) if len(said) == 2 else (0, 0)
        there = str(got.get("folder") or folder)
        if got.get("unchanged"):
            return HostFiles(stamp=when, unchanged=True, folder=there)
        files = _names(got.get("files"))
        source = "git" if got.get("source") == "git" else "walk"
        folders = _names(got.get("folders")) if source == "walk" else ()
    except (ValueError, TypeError, zlib.error):
        raise HostError(f"{target.label} gave an answer Tolaria cannot read") from None
    return HostFiles(files, folders, source, bool(got.get("truncated")), when, folder=there)


def _names(packed: object) -> tuple[str, ...]:
    if not packed:
        return ()
    unpack = zlib.decompressobj()
    raw = unpack.decompress(b64decode(packed), MOST_BYTES + 1)
    if len(raw) > MOST_BYTES or unpack.unconsumed_tail:
        raise ValueError("over the limit")
    return tuple(n for n in raw.decode("utf-8", "surrogateescape").split("\0") if n)
