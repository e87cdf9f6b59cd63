"""Taking a snapshot: the work tree's files as a tree in Tolaria's store, within limits.

Tracked files come from a copy of the user's index (git's stat cache keeps 100,000 files fast).
The usual way (basetree.py) keeps that copy, refreshed, between snapshots and turns, walks the
work tree once (``git status`` with git's untracked cache) and writes trees only along the
changed paths (tree_edit.py); a work tree it cannot serve (a conflicted or split index, files
whose mode git is told to ignore, a changed submodule, an inner repository...) is taken the
general way: a fresh copy of the index, ``update-index``, ``write-tree``.

A tracked file with a filter or another conversion in the user's attributes (Git LFS,
git-crypt, ``ident``, ``eol``) is hashed again from its work-tree bytes, because the index holds
its *cleaned* blob, which must never be written back over the real file (too big to hash: left
out). Untracked, not ignored files are taken within ``Limits`` (untracked.py). Unreadable files
are left out, never fatal. What was left out comes back as ``Skipped`` and is written into the
commit's message.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

from tolaria.core.checkpoints import basetree, tree_edit
from tolaria.core.checkpoints.converted import converted
from tolaria.core.checkpoints.gitrun import (
    Cancel,
    CheckpointCancelled,
    CheckpointError,
    in_user_repo,
    run,
    safe_env,
)
from tolaria.core.checkpoints.model import Limits, Skipped
from tolaria.core.checkpoints.store import Layout, refresh_excludes, store_git, store_listing
from tolaria.core.checkpoints.untracked import (
    Git,
    drop_caches,
    error_paths,
    hash_files,
    load_cache,
    save_cache,
    select,
)


def write_tree(lay: Layout, limits: Limits, cancel: Cancel | None = None
               ) -> tuple[str, Skipped]:
    """The tree of the work tree now (in Tolaria's store) and what it left out."""
    started = time.monotonic()
    excludes = refresh_excludes(lay)
    try:
        return _fast(lay, limits, cancel, excludes, started)
    except CheckpointCancelled:
        raise
    except basetree.NotFast:
        pass
    except CheckpointError:
        # A cached blob or a base tree may be gone (pruned): the general way, from scratch.
        drop_caches(lay.store)
        basetree.drop_bases(lay.store)
    try:
        return _write_tree(lay, limits, cancel, use_cache=True, excludes=excludes,
                           started=started)
    except CheckpointCancelled:
        raise
    except CheckpointError:
        drop_caches(lay.store)  # a cached blob may be gone (pruned): once more, from scratch
        return _write_tree(lay, limits, cancel, use_cache=False, excludes=excludes,
                           started=started)


def _plain_modes(lay: Layout) -> bool:
    """Whether git takes file modes and links from the work tree as they are (the fast way
    reads them with ``lstat``)."""
    try:
        config = (lay.store / "config").read_text(errors="replace").lower()
    except OSError:
        return False
    return "filemode = false" not in config and "symlinks = false" not in config


def _fast(lay: Layout, limits: Limits, cancel: Cancel | None, excludes: str, started: float
          ) -> tuple[str, Skipped]:
    if not _plain_modes(lay):
        raise basetree.NotFast("file modes from the config")
    base = basetree.base_of(lay, cancel)
    changed, entries, said = basetree.status(lay, base, excludes, cancel)
    unreadable = error_paths(said)

    def git(*args: str, **kw: Any) -> CompletedProcess[bytes]:
        return store_git(lay, *args, index=base.index, excludes=excludes, cancel=cancel, **kw)

    def listing(*args: str, most: int, timeout: float) -> tuple[list[bytes], bytes, bool]:
        return store_listing(lay, *args, index=base.index, excludes=excludes, most=most,
                             cancel=cancel, timeout=timeout)

    rehash, filtered = converted(lay, git, limits)
    converting = set(rehash)
    changes: tree_edit.Changes = dict.fromkeys(filtered)
    tracked: list[tuple[str, str, os.stat_result | None]] = []
    root = str(lay.top) + os.sep
    for path in dict.fromkeys((*changed, *rehash)):
        if path in changes:  # filtered and too big: left out
            continue
        try:
            info = os.lstat(root + path)
        except OSError:
            changes[path] = None  # deleted
            continue
        if stat.S_ISDIR(info.st_mode):
            # A submodule moved to another commit; else a file that became a folder (its
            # files are untracked ones).
            changes[path] = _gitlink(lay, path, unreadable)
        elif stat.S_ISREG(info.st_mode) and not os.access(root + path, os.R_OK):
            unreadable.append(path)  # left as the index has it; never a cleaned blob:
            if path in converting:
                changes[path] = None
        else:
            tracked.append((path, path, info))
    files, skipped = select(lay, git, limits, started, unreadable, listing, entries)
    cache = load_cache(lay)
    known, special, late = hash_files(git, lay, tracked, cache, time.monotonic() + 60)
    if late:
        raise CheckpointError("hashing the changed tracked files took too long")
    more, special_new, late = hash_files(git, lay, files, cache,
                                         started + limits.time_budget_s)
    for mode, sha, path in known + more:
        changes[path] = (mode, sha)
    for path in special + special_new:
        if (lay.top / path).is_symlink() or "\n" in path:
            changes[path] = _link(lay, git, path)
        elif (lay.top / path).is_dir():  # a repository inside the tree: recorded as its commit
            changes[path] = _gitlink(lay, path, unreadable)
    save_cache(lay, {p: cache[p] for _e, p, _i in tracked + files if p in cache})
    tree = tree_edit.edit(lay, base.tree, changes, cancel)
    over = tuple(dict.fromkeys((*skipped.over_budget, *late)))
    return tree, Skipped(skipped.large, skipped.heavy, tuple(dict.fromkeys(unreadable)),
                         over, filtered, skipped.untracked_off, limits.max_file_bytes)


def _link(lay: Layout, git: Git, path: str) -> tuple[str, str]:
    """A symbolic link's blob (its target's text); anything else is the general way's."""
    target = lay.top / path
    if "\n" in path or not target.is_symlink():
        raise basetree.NotFast(f"{path} needs update-index")
    with tempfile.NamedTemporaryFile(prefix="tolaria-link-") as text:
        text.write(os.fsencode(os.readlink(target)))
        text.flush()
        sha = git("hash-object", "-w", "--no-filters", "--stdin-paths",
                  stdin=text.name.encode() + b"\n").stdout.decode().strip()
    return "120000", sha


def _gitlink(lay: Layout, path: str, unreadable: list[str]) -> tuple[str, str] | None:
    """A repository inside the work tree as its checked-out commit (as ``update-index`` records
    it: ``rev-parse`` reads its refs, runs nothing); None when it is no repository (a plain
    folder) or has no commit yet (then listed as unreadable, as the general way does)."""
    target = lay.top / path
    if not (target / ".git").exists():
        return None
    done = in_user_repo(target, "rev-parse", "--verify", "--quiet", "HEAD^{commit}",
                        check=False)
    sha = done.stdout.decode().strip()
    if done.returncode != 0 or not sha:
        unreadable.append(path)
        return None
    return "160000", sha


def _write_tree(lay: Layout, limits: Limits, cancel: Cancel | None, use_cache: bool,
                excludes: str, started: float) -> tuple[str, Skipped]:
    with tempfile.TemporaryDirectory(prefix="tolaria-ckpt-") as tmp:
        index = Path(tmp) / "index"
        if lay.index.is_file():
            index.write_bytes(lay.index.read_bytes())
            # The copy keeps the index's own mtime: git re-reads an entry whose file is not
            # older than its index ("racily clean"); with a fresh mtime a same-size edit made in
            # the second of the user's last `git add` would look unchanged and be missed.
            shutil.copystat(lay.index, index)

        def git(*args: str, **kw: Any) -> CompletedProcess[bytes]:
            return store_git(lay, *args, index=index, excludes=excludes, cancel=cancel, **kw)

        unreadable: list[str] = []
        # One walk (``ls-files -m -d -o``, git's stat cache): the changed tracked files are put
        # into the index copy alone, the untracked top entries listed.
        entries = _scan(git, unreadable)
        if entries is None:  # an index copy our git cannot read alone: the slow way
            _tracked(lay, git, index, unreadable)
        rehash, filtered = converted(lay, git, limits)
        cache = load_cache(lay) if use_cache else {}
        if rehash or filtered:
            git("update-index", "--force-remove", "-z", "--stdin",
                stdin=_nul([*rehash, *filtered]))
        present = [p for p in rehash if os.path.lexists(lay.top / p)]
        if present:
            _index_info(git, lay, [(p, p, _lstat(lay, p)) for p in present], cache, unreadable)

        def listing(*args: str, most: int, timeout: float
                    ) -> tuple[list[bytes], bytes, bool]:
            return store_listing(lay, *args, index=index, excludes=excludes, most=most,
                                 cancel=cancel, timeout=timeout)

        files, skipped = select(lay, git, limits, started, unreadable, listing, entries)
        late: list[str] = []
        if files:
            late = _index_info(git, lay, files, cache, unreadable, started + limits.time_budget_s)
        if use_cache:  # only the files this snapshot saw: the cache does not grow for ever
            save_cache(lay, {p: cache[p] for p in (*present, *(f[1] for f in files))
                             if p in cache})
        tree = git("write-tree").stdout.decode().strip()
    over = tuple(dict.fromkeys((*skipped.over_budget, *late)))
    return tree, Skipped(skipped.large, skipped.heavy, tuple(dict.fromkeys(unreadable)),
                         over, filtered, skipped.untracked_off, limits.max_file_bytes)


def _lstat(lay: Layout, path: str) -> os.stat_result | None:
    try:
        return os.lstat(lay.top / path)
    except OSError:
        return None


def _index_info(git: Git, lay: Layout, files: list[tuple[str, str, os.stat_result | None]],
                cache: dict[str, list[object]], unreadable: list[str],
                deadline: float | None = None) -> list[str]:
    """Hash ``files`` (hash_files) into the index copy; the top entries left out (late)."""
    known, special, late = hash_files(git, lay, files, cache,
                                      deadline if deadline is not None else time.monotonic() + 60)
    if late and deadline is None:
        raise CheckpointError("hashing the converted tracked files took too long")
    if known:
        git("update-index", "-z", "--index-info", stdin=b"".join(
            f"{mode} {sha}\t".encode() + path.encode(errors="surrogateescape") + b"\0"
            for mode, sha, path in known))
    if special:
        _add(git, special, unreadable)
    return late


def _scan(git: Git, unreadable: list[str]) -> list[str] | None:
    """The changed and deleted tracked files updated in the index copy; the untracked top
    entries (files, and folders as one entry) returned. None when git cannot read the copy."""
    done = git("ls-files", "-z", "-t", "--modified", "--deleted", "--others",
               "--exclude-standard", "--directory", "--no-empty-directory", check=False)
    if done.returncode != 0:
        return None
    unreadable.extend(error_paths(done.stderr))
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
    failed = error_paths(done.stderr)
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
        failed = error_paths(done.stderr)
        if not failed:
            why = done.stderr.decode(errors="replace").strip().splitlines()
            raise CheckpointError(f"git add failed: {why[-1] if why else done.returncode}")
        unreadable.extend(failed)


def _add(git: Git, files: list[str], unreadable: list[str], *flags: str) -> None:
    """``update-index --add`` the files (no directory walk); one that git cannot read is left
    out and listed, and the rest added again."""
    pending = list(files)
    for _attempt in range(50):
        done = git("update-index", "--add", *flags, "-z", "--stdin", stdin=_nul(pending),
                   check=False)
        if done.returncode == 0:
            return
        failed = set(error_paths(done.stderr)) & set(pending)
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
