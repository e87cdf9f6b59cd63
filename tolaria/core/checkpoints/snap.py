"""Taking a snapshot: the work tree's files as a tree in Tolaria's store, within limits.

Tracked files come from a copy of the user's index (git's stat cache keeps 100,000 files fast);
a tracked file with a filter or another conversion in the user's attributes (Git LFS, git-crypt,
``ident``, ``eol``) is hashed again from its work-tree bytes, because the index holds its
*cleaned* blob, which must never be written back over the real file (too big to hash: left out).
Untracked, not ignored files are listed first and then added only within ``Limits``: no file over
the size cap, no well-known heavy folder (``node_modules/``...), no more than the count and bytes
budget, nothing once the time budget is spent. Unreadable files are left out, never fatal.
What was left out comes back as ``Skipped`` and is written into the commit's message.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

from tolaria.core.checkpoints.gitrun import (
    Cancel,
    CheckpointCancelled,
    CheckpointError,
    GitTimeout,
    run,
    safe_env,
    user_global_values,
)
from tolaria.core.checkpoints.model import Limits, Skipped
from tolaria.core.checkpoints.store import Layout, refresh_excludes, store_git, store_listing

_OPEN_ERROR = re.compile(r'open\("(.+)"\): ')
_INDEX_ERROR = re.compile(r"unable to (?:index|process|stat) (?:file |path )?'?(.+?)'?$")
_PROCESS_ERROR = re.compile(r"Unable to process path (.+)$")
_DIR_ERROR = re.compile(r"could not open directory '(.+)': ")
_CONVERSIONS = re.compile(rb"\b(filter|ident|eol|working-tree-encoding)\b")

Git = Callable[..., CompletedProcess[bytes]]


def write_tree(lay: Layout, limits: Limits, cancel: Cancel | None = None
               ) -> tuple[str, Skipped]:
    """The tree of the work tree now (in Tolaria's store) and what it left out."""
    try:
        return _write_tree(lay, limits, cancel, use_cache=True)
    except CheckpointCancelled:
        raise
    except CheckpointError:
        drop_caches(lay.store)  # a cached blob may be gone (pruned): once more, from scratch
        return _write_tree(lay, limits, cancel, use_cache=False)


def _write_tree(lay: Layout, limits: Limits, cancel: Cancel | None, use_cache: bool
                ) -> tuple[str, Skipped]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tolaria-ckpt-") as tmp:
        index = Path(tmp) / "index"
        if lay.index.is_file():
            index.write_bytes(lay.index.read_bytes())
            # The copy keeps the index's own mtime: git re-reads an entry whose file is not
            # older than its index ("racily clean"); with a fresh mtime a same-size edit made in
            # the second of the user's last `git add` would look unchanged and be missed.
            shutil.copystat(lay.index, index)
        excludes = refresh_excludes(lay)

        def git(*args: str, **kw: Any) -> CompletedProcess[bytes]:
            return store_git(lay, *args, index=index, excludes=excludes, cancel=cancel, **kw)

        unreadable: list[str] = []
        # One walk (``ls-files -m -d -o``, git's stat cache): the changed tracked files are put
        # into the index copy alone, the untracked top entries listed. (``git status`` compares
        # the whole index with the store's empty HEAD: slower on 100,000 files.)
        entries = _scan(git, unreadable)
        if entries is None:  # an index copy our git cannot read alone: the slow way
            _tracked(lay, git, index, unreadable)
        filtered = _rehash_converted(lay, git, limits)
        def listing(*args: str, most: int, timeout: float
                    ) -> tuple[list[bytes], bytes, bool]:
            return store_listing(lay, *args, index=index, excludes=excludes, most=most,
                                 cancel=cancel, timeout=timeout)

        files, skipped = _untracked(lay, git, limits, started, unreadable, listing, entries)
        late: list[str] = []
        if files:
            late = _add_untracked(lay, git, files, unreadable, use_cache,
                                  started + limits.time_budget_s)
        tree = git("write-tree").stdout.decode().strip()
    over = tuple(dict.fromkeys((*skipped.over_budget, *late)))
    return tree, Skipped(skipped.large, skipped.heavy, tuple(dict.fromkeys(unreadable)),
                         over, filtered, skipped.untracked_off, limits.max_file_bytes)


def _scan(git: Git, unreadable: list[str]) -> list[str] | None:
    """The changed and deleted tracked files updated in the index copy; the untracked top
    entries (files, and folders as one entry) returned. None when git cannot read the copy."""
    done = git("ls-files", "-z", "-t", "--modified", "--deleted", "--others",
               "--exclude-standard", "--directory", "--no-empty-directory", check=False)
    if done.returncode != 0:
        return None
    unreadable.extend(_error_paths(done.stderr))
    changed: dict[str, None] = {}
    untracked: list[str] = []
    for record in done.stdout.split(b"\0"):
        tag, path = record[:2], record[2:].decode(errors="surrogateescape")
        if not path:
            continue
        if tag == b"? ":
            untracked.append(path)
        elif tag in (b"C ", b"R ", b"M "):  # changed, removed, unmerged
            changed[path] = None
    if changed:
        _add(git, list(changed), unreadable, "--remove")
    return untracked


def _tracked(lay: Layout, git: Git, index: Path, unreadable: list[str]) -> None:
    """Tracked files' edits and deletions into the index copy."""
    done = git("add", "--update", "--ignore-errors", check=False)
    if done.returncode == 0:
        return
    failed = _error_paths(done.stderr)
    if failed and b"fatal:" not in done.stderr:
        unreadable.extend(failed)
        return
    # An index our git cannot read alone (a split index's shared part lives in the user's git
    # folder): start from the user's HEAD instead (slower: every tracked file hashed).
    index.unlink(missing_ok=True)
    head = run(["-C", str(lay.top), "rev-parse", "--verify", "--quiet", "HEAD^{tree}"],
               env=safe_env(), check=False).stdout.decode().strip()
    if head:
        git("read-tree", head)
    done = git("add", "--update", "--ignore-errors", check=False)
    if done.returncode != 0:
        failed = _error_paths(done.stderr)
        if not failed:
            why = done.stderr.decode(errors="replace").strip().splitlines()
            raise CheckpointError(f"git add failed: {why[-1] if why else done.returncode}")
        unreadable.extend(failed)


def _error_paths(stderr: bytes) -> list[str]:
    found = []
    for line in stderr.decode(errors="surrogateescape").splitlines():
        for pattern in (_OPEN_ERROR, _DIR_ERROR, _PROCESS_ERROR, _INDEX_ERROR):
            match = pattern.search(line)
            if match:
                found.append(match.group(1))
                break
    return found


def _rehash_converted(lay: Layout, git: Git, limits: Limits) -> tuple[str, ...]:
    """Tracked files the user's attributes convert, hashed again from their work-tree bytes
    (the index copy holds their cleaned blob); too big ones left out. Returns those."""
    if not _attributes_convert(lay, git):
        return ()
    tracked = [p for p in git("ls-files", "-z").stdout.split(b"\0") if p]
    user_attributes = (user_global_values("core.attributesFile") or ["/dev/null"])[-1]
    done = run(["-C", str(lay.top), "-c", f"core.attributesFile={user_attributes}",
                "check-attr", "-z", "--stdin", "filter", "ident", "eol",
                "working-tree-encoding"], env=safe_env(), stdin=b"\0".join(tracked) + b"\0")
    fields = done.stdout.split(b"\0")
    converted: list[str] = []
    for path, _attr, info in zip(fields[0::3], fields[1::3], fields[2::3], strict=False):
        if info not in (b"unspecified", b"unset", b""):
            converted.append(path.decode(errors="surrogateescape"))
    converted = list(dict.fromkeys(converted))
    if not converted:
        return ()
    rehash: list[str] = []
    left_out: list[str] = []
    for name in converted:
        try:
            size = os.lstat(lay.top / name).st_size
        except OSError:
            continue  # deleted: it stays deleted
        (left_out if size > limits.max_file_bytes else rehash).append(name)
    git("update-index", "--force-remove", "-z", "--stdin", stdin=_nul(converted))
    if rehash:
        git("update-index", "--add", "-z", "--stdin", stdin=_nul(rehash))
    return tuple(left_out)


def _attributes_convert(lay: Layout, git: Git) -> bool:
    """Whether any attributes file the user's git reads names a filter or conversion."""
    sources = [lay.common_dir / "info" / "attributes"]
    sources += [Path(p) for p in user_global_values("core.attributesFile")]
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    sources.append(Path(xdg) / "git" / "attributes")
    sources += [lay.top / p for p in _tracked_attributes(lay, git)]
    for source in sources:
        try:
            if _CONVERSIONS.search(source.read_bytes()):
                return True
        except OSError:
            continue
    return False


_attribute_files: dict[str, tuple[tuple[int, int], list[str]]] = {}


def _tracked_attributes(lay: Layout, git: Git) -> list[str]:
    """The tracked ``.gitattributes`` files, asked again only when the user's index changed."""
    try:
        info = os.stat(lay.index)
        stamp = (info.st_mtime_ns, info.st_size)
    except OSError:
        stamp = (0, 0)
    known = _attribute_files.get(str(lay.index))
    if known is not None and known[0] == stamp and stamp != (0, 0):
        return known[1]
    listed = git("ls-files", "-z", "--", ".gitattributes", "*/.gitattributes").stdout
    names = [p.decode(errors="surrogateescape") for p in listed.split(b"\0") if p]
    _attribute_files[str(lay.index)] = (stamp, names)
    return names


def _untracked(lay: Layout, git: Git, limits: Limits, started: float, unreadable: list[str],
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
            entries = _names(top.stdout)
            unreadable.extend(_error_paths(top.stderr))
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
            unreadable.extend(_error_paths(said))
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


def _add_untracked(lay: Layout, git: Git, taken: list[tuple[str, str, os.stat_result | None]],
                   unreadable: list[str], use_cache: bool, deadline: float) -> list[str]:
    """Add the untracked files to the index copy; returns the top entries left out because the
    time budget ran out while hashing.

    Regular files whose stat matches an earlier snapshot's (Tolaria's own stat cache: git keeps
    none for untracked files) reuse their blob; the others are hashed by ``hash-object`` in
    chunks, each chunk remembered at once, so a big folder is taken over several turns rather
    than never; links and inner repositories are added by ``update-index``."""
    cache = _load_cache(lay) if use_cache else {}
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
    if known:
        git("update-index", "-z", "--index-info", stdin=b"".join(
            f"{mode} {sha}\t".encode() + path.encode(errors="surrogateescape") + b"\0"
            for mode, sha, path in known))
    if special:
        _add(git, special, unreadable)
    if use_cache:  # only the files this snapshot saw: the cache does not grow for ever
        _save_cache(lay, {path: cache[path] for _e, path, _i in taken if path in cache})
    return list(late)


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


def _load_cache(lay: Layout) -> dict[str, list[object]]:
    try:
        data = json.loads(_cache_file(lay).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_cache(lay: Layout, entries: dict[str, list[object]]) -> None:
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


def _names(out: bytes) -> list[str]:
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


def _add(git: Git, files: list[str], unreadable: list[str], *flags: str) -> None:
    """``update-index --add`` the files (no directory walk); one that git cannot read is left
    out and listed, and the rest added again."""
    pending = list(files)
    for _attempt in range(50):
        done = git("update-index", "--add", *flags, "-z", "--stdin", stdin=_nul(pending),
                   check=False)
        if done.returncode == 0:
            return
        failed = set(_error_paths(done.stderr)) & set(pending)
        if not failed:
            why = done.stderr.decode(errors="replace").strip().splitlines()
            raise CheckpointError(f"git update-index failed: {why[-1] if why else '?'}")
        unreadable.extend(sorted(failed))
        pending = [p for p in pending if p not in failed]
        if not pending:
            return
    raise CheckpointError("git update-index failed on too many files")


def _nul(items: list[str]) -> bytes:
    return b"".join(p.encode(errors="surrogateescape") + b"\0" for p in items)
