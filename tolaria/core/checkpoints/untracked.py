"""Untracked files within limits, and the blobs of files hashed from their work-tree bytes.

``select`` picks the untracked, not ignored files a snapshot takes: no file over the size cap,
no well-known heavy folder (``node_modules/``...), within the count and bytes budget, nothing
once the time budget is spent; unreadable ones are listed. ``hash_files`` hashes files with no
filter (``hash-object --no-filters``) and keeps a stat cache of Tolaria's own, so an unchanged
file is not read again by the next snapshot.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from tolaria.core.checkpoints.gitrun import GitTimeout
from tolaria.core.checkpoints.model import Limits, Skipped
from tolaria.core.checkpoints.store import Layout

_OPEN_ERROR = re.compile(r'open\("(.+)"\): ')
_INDEX_ERROR = re.compile(r"unable to (?:index|process|stat) (?:file |path )?'?(.+?)'?$")
_PROCESS_ERROR = re.compile(r"Unable to process path (.+)$")
_DIR_ERROR = re.compile(r"could not open directory '(.+)': ")

Git = Callable[..., CompletedProcess[bytes]]


def error_paths(stderr: bytes) -> list[str]:
    """The paths git's messages say it could not read."""
    found = []
    for line in stderr.decode(errors="surrogateescape").splitlines():
        for pattern in (_OPEN_ERROR, _DIR_ERROR, _PROCESS_ERROR, _INDEX_ERROR):
            match = pattern.search(line)
            if match:
                found.append(match.group(1))
                break
    return found


def select(lay: Layout, git: Git, limits: Limits, started: float, unreadable: list[str],
               listing: Callable[..., tuple[list[bytes], bytes, bool]],
               listed: list[str] | None = None,
               ) -> tuple[list[tuple[str, str, os.stat_result | None]], Skipped]:
    """The untracked, not ignored files to add (their top entry, path, stat), and what is left
    out.

    The budget goes by *top entries* (an untracked file, or an untracked folder as one entry),
    smallest first, each taken whole or left out whole: a new file next to a huge new folder is
    taken, the folder is listed ("assets/"). Folder listings are read only up to the budget."""
    off = Skipped(untracked_off=True, max_file_bytes=limits.max_file_bytes)

    def left() -> float:
        return limits.time_budget_s - (time.monotonic() - started)

    if left() <= 0:
        return [], off
    heavy_names = set(limits.heavy_dirs)
    try:
        if listed is not None:
            entries = listed
        else:
            top = git("ls-files", "-z", "--others", "--exclude-standard", "--directory",
                      "--no-empty-directory", timeout=max(left(), 0.1))
            entries = nul_names(top.stdout)
            unreadable.extend(error_paths(top.stderr))
        heavy = [e for e in entries if e.endswith("/") and
                 e.rstrip("/").rsplit("/", 1)[-1] in heavy_names]
        folders = [e for e in entries if e.endswith("/") and e not in heavy]
        groups: dict[str, list[str]] = {e: [e] for e in entries if not e.endswith("/")}
        over: dict[str, None] = {}
        # Few untracked folders (the usual case): each listed alone, so one huge folder leaves
        # the others alone; many: in batches.
        step = 1 if len(folders) <= 8 else 500
        for at in range(0, len(folders), step):
            some = folders[at:at + step]
            names, said, cut = listing("ls-files", "-z", "--others", "--exclude-standard", "--",
                                       *some, most=limits.max_files + 1,
                                       timeout=max(left(), 0.1))
            unreadable.extend(error_paths(said))
            tops = set(some)
            found: dict[str, list[str]] = {e: [] for e in some}
            for raw in names:
                path = raw.decode(errors="surrogateescape")
                found[_entry_of(path, tops)].append(path)
            if cut:  # the folder the listing stopped in, and those after it: not looked at
                last = _entry_of(names[-1].decode(errors="surrogateescape"), tops)
                reached = False
                for entry in some:
                    reached = reached or entry == last
                    if reached:
                        over[entry] = None
                        found.pop(entry, None)
                groups.update(found)
                if step > 1:
                    over.update((e, None) for e in folders[at + step:])
                    break
                continue
            groups.update(found)
    except GitTimeout:
        return [], off
    root = str(lay.top) + os.sep
    taken: list[tuple[str, str, os.stat_result | None]] = []
    large: list[str] = []
    count = size = 0
    for n, entry in enumerate(sorted(groups, key=lambda e: (len(groups[e]), e))):
        if n % 64 == 0 and left() <= 0:
            return [], off
        paths = groups[entry]
        if count + len(paths) > limits.max_files:
            over[entry] = None
            continue
        mine: list[tuple[str, str, os.stat_result | None]] = []
        bytes_ = 0
        for path in paths:
            if "/" in path:
                heavy_at = _heavy_prefix(path, heavy_names)
                if heavy_at is not None:
                    heavy.append(heavy_at)
                    continue
            if path.endswith("/"):  # a repository inside the tree: recorded as its commit
                mine.append((entry, path.rstrip("/"), None))
                continue
            try:
                info = os.lstat(root + path)
            except OSError:
                continue  # gone meanwhile
            if stat.S_ISREG(info.st_mode):
                if info.st_size > limits.max_file_bytes:
                    large.append(path)
                    continue
                if not os.access(root + path, os.R_OK):
                    unreadable.append(path)
                    continue
            bytes_ += info.st_size
            mine.append((entry, path, info))
        if count + len(mine) > limits.max_files or size + bytes_ > limits.max_bytes:
            over[entry] = None
            continue
        count += len(mine)
        size += bytes_
        taken += mine
    return taken, Skipped(tuple(large), tuple(dict.fromkeys(heavy)), (), tuple(over),
                          max_file_bytes=limits.max_file_bytes)


_CHUNK = 256


def hash_files(git: Git, lay: Layout, taken: list[tuple[str, str, os.stat_result | None]],
               cache: dict[str, list[object]], deadline: float,
               ) -> tuple[list[tuple[str, str, str]], list[str], list[str]]:
    """The blobs of the files ``taken`` (top entry, path, stat): ((mode, object id, path)...,
    the paths git must add itself, the top entries left out because the time budget ran out
    while hashing).

    Regular files whose stat matches an earlier snapshot's (``cache``, Tolaria's own stat cache:
    git keeps none for untracked files) reuse their blob; the others are hashed by
    ``hash-object`` in chunks, each chunk remembered at once, so a big folder is taken over
    several turns rather than never. Links, inner repositories, names with a newline and a chunk
    one of whose files could not be read are left to ``update-index`` (the second list)."""
    known: list[tuple[str, str, str]] = []
    to_hash: list[tuple[str, str, os.stat_result]] = []
    special: list[str] = []
    for entry, path, info in taken:
        if info is None or not stat.S_ISREG(info.st_mode) or "\n" in path:
            special.append(path)
            continue
        seen = cache.get(path)
        if seen is not None and seen[:5] == _stamp(info) and _freshen(lay, str(seen[5])):
            known.append((_mode(info), str(seen[5]), path))
        else:
            to_hash.append((entry, path, info))
    late: dict[str, None] = {}
    racy = time.time_ns() - 2_000_000_000  # changed in the last 2 s: hashed again next time
    for at in range(0, len(to_hash), _CHUNK):
        chunk = to_hash[at:at + _CHUNK]
        left = deadline - time.monotonic()
        if left <= 0:
            late.update((entry, None) for entry, _p, _i in to_hash[at:])
            break
        try:
            done = git("hash-object", "-w", "--no-filters", "--stdin-paths", check=False,
                       timeout=max(left, 0.5),
                       stdin="".join(p + "\n" for _e, p, _i in chunk).encode(
                           errors="surrogateescape"))
        except GitTimeout:
            late.update((entry, None) for entry, _p, _i in to_hash[at:])
            break
        shas = done.stdout.decode().split()
        if done.returncode != 0 or len(shas) != len(chunk):
            special += [path for _e, path, _i in chunk]  # one became unreadable: file by file
            continue
        for (_entry, path, info), sha in zip(chunk, shas, strict=True):
            known.append((_mode(info), sha, path))
            if max(info.st_mtime_ns, info.st_ctime_ns) < racy:
                cache[path] = [*_stamp(info), sha]
    if late:  # a top entry half hashed is left out whole: the same way in every snapshot
        tops = set(late)
        known = [k for k in known if _entry_of(k[2], tops) not in tops]
        special = [p for p in special if _entry_of(p, tops) not in tops]
    return known, special, list(late)


def _freshen(lay: Layout, sha: str) -> bool:
    """Mark a cached blob as just used, as git does when it writes an object it already has: a
    prune running meanwhile (storage.py keeps the objects younger than its grace period) then
    keeps it although it did not see this snapshot's ref yet. False when it is gone (pruned):
    the file is hashed again. A blob of the user's own repository is only looked for (our
    prune never touches it; in a pack of theirs it is hashed again, as without the cache)."""
    loose = f"{sha[:2]}/{sha[2:]}"
    try:
        os.utime(lay.store / "objects" / loose)
        return True
    except OSError:
        return os.path.isfile(lay.common_dir / "objects" / loose)


def _stamp(info: os.stat_result) -> list[object]:
    """What says a file is unchanged (as git's own stat cache: the change time too, which no
    ``touch`` can set back)."""
    return [info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_mode]


def _mode(info: os.stat_result) -> str:
    return "100755" if info.st_mode & 0o100 else "100644"


def _cache_file(lay: Layout) -> Path:
    digest = hashlib.sha256(str(lay.top).encode(errors="surrogateescape")).hexdigest()[:16]
    return lay.store / "tolaria-untracked" / f"{digest}.json"


def load_cache(lay: Layout) -> dict[str, list[object]]:
    try:
        data = json.loads(_cache_file(lay).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_cache(lay: Layout, entries: dict[str, list[object]]) -> None:
    target = _cache_file(lay)
    try:
        target.parent.mkdir(exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps(entries))
        os.replace(tmp, target)
    except OSError:
        pass  # only a cache


def drop_caches(store: Path) -> None:
    """Forget the stat caches (their blobs may be pruned)."""
    shutil.rmtree(store / "tolaria-untracked", ignore_errors=True)


def nul_names(out: bytes) -> list[str]:
    return [p.decode(errors="surrogateescape") for p in out.split(b"\0") if p]


def _entry_of(path: str, tops: set[str]) -> str:
    at = path.find("/")
    while at != -1:
        if path[:at + 1] in tops:
            return path[:at + 1]
        at = path.find("/", at + 1)
    return path


def _heavy_prefix(path: str, heavy: set[str]) -> str | None:
    parts = path.rstrip("/").split("/")
    for i, part in enumerate(parts[:-1]):
        if part in heavy:
            return "/".join(parts[:i + 1]) + "/"
    return None


