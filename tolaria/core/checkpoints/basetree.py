"""The fast way to snapshot a big work tree (issue 21 item 4: 100,000 tracked files).

A copy of the user's index is kept in Tolaria's store between snapshots (and turns) as the
*base*, with the tree it stands for; it is copied again only when the user's index changed.
One ``git status`` walk against it (git's stat cache, refreshed and written back into the base
copy, and git's untracked cache of that copy) gives the changed tracked files and the untracked
top entries; the snapshot's tree is then the base tree with only the changed paths' trees
written again (tree_edit.py), never a ``write-tree`` over every entry.

The base has a git folder of its own in the store (``worktrees/tolaria-<digest>``, git's
linked-worktree layout: the store's objects, refs, config and neutral attributes) whose
detached ``HEAD`` is the base tree's commit, so that ``git status`` compares the index with a
matching HEAD in no time (and a prune, ``rev-list --all``, keeps the base tree's objects). Each base index is a file of its own, named in ``base.json``; a
snapshot reads the name once and uses that file, so another process making a newer base never
changes the file under it (old ones go after a minute).

Nothing here runs anything of the repository's: the store's config and attributes only, the
safe config of gitrun.py; ``GIT_OPTIONAL_LOCKS=1`` only lets git write the base copy (Tolaria's
own file) after its walk.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tolaria.core.checkpoints.gitrun import Cancel, CheckpointError, run, safe_env
from tolaria.core.checkpoints.store import Layout, store_git
from tolaria.support.tomlfile import write_atomic

#: A base index file another snapshot may still read is kept this long after it was replaced.
_KEEP_OLD_S = 60.0
_lock = threading.Lock()


class NotFast(CheckpointError):
    """This work tree needs the general (slower) snapshot: a split or conflicted index, ..."""


@dataclass(frozen=True)
class Base:
    """A refreshed copy of the user's index and the tree it stands for."""

    gitdir: Path
    index: Path
    tree: str


def _digest(lay: Layout) -> str:
    return hashlib.sha256(str(lay.top).encode(errors="surrogateescape")).hexdigest()[:16]


def _folder(lay: Layout) -> Path:
    return lay.store / "tolaria-base"


def _stamp(path: Path) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino]


def base_of(lay: Layout, cancel: Cancel | None = None) -> Base:
    """The base for ``lay``'s work tree: the stored one while the user's index is unchanged,
    else a new copy (NotFast when git cannot use a copy of that index alone)."""
    stamp = _stamp(lay.index)
    if stamp is None:
        raise NotFast("no index yet")
    digest = _digest(lay)
    folder = _folder(lay)
    gitdir = lay.store / "worktrees" / f"tolaria-{digest}"
    state = _read_state(folder / f"{digest}.json")
    if state is not None and state.get("stamp") == stamp:
        index = folder / str(state.get("index"))
        tree = str(state.get("tree"))
        if index.is_file() and (gitdir / "HEAD").is_file():
            _drop_stale_lock(index)
            return Base(gitdir, index, tree)
    return _new_base(lay, digest, stamp, gitdir, cancel)


def _read_state(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _new_base(lay: Layout, digest: str, stamp: list[int], gitdir: Path,
              cancel: Cancel | None) -> Base:
    folder = _folder(lay)
    folder.mkdir(exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f"{digest}-", suffix=".index", dir=folder)
    os.close(fd)
    index = Path(name)
    try:
        shutil.copyfile(lay.index, index)
        # The copy keeps the index's own mtime: git re-reads an entry whose file is not older
        # than its index ("racily clean"); with a fresh mtime a same-size edit made in the
        # second of the user's last `git add` would look unchanged and be missed.
        shutil.copystat(lay.index, index)
        if _stamp(lay.index) != stamp:
            raise NotFast("the index changed while it was copied")
        done = store_git(lay, "write-tree", index=index, cancel=cancel, check=False)
        if done.returncode != 0:  # conflicts, a split index, an intent-to-add...
            raise NotFast("git write-tree cannot use a copy of this index")
        tree = done.stdout.decode().strip()
        commit = store_git(lay, "commit-tree", tree, stdin=b"tolaria base\n",
                           cancel=cancel).stdout.decode().strip()
        with _lock:
            _make_gitdir(lay, gitdir, commit)
            write_atomic(folder / f"{digest}.json", json.dumps(
                {"stamp": stamp, "index": index.name, "tree": tree, "top": str(lay.top)}))
        _drop_old(folder, digest, keep=index.name)
    except BaseException:
        index.unlink(missing_ok=True)
        raise
    return Base(gitdir, index, tree)


def _make_gitdir(lay: Layout, gitdir: Path, commit: str) -> None:
    gitdir.mkdir(parents=True, exist_ok=True)
    write_atomic(gitdir / "commondir", "../..\n")
    write_atomic(gitdir / "gitdir", f"{lay.top / '.git'}\n")
    write_atomic(gitdir / "HEAD", f"{commit}\n")


def _drop_old(folder: Path, digest: str, keep: str) -> None:
    cutoff = time.time() - _KEEP_OLD_S
    for old in folder.glob(f"{digest}-*.index*"):
        try:
            if old.name != keep and old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            continue


def _drop_stale_lock(index: Path) -> None:
    """A lock left by a git killed mid-write (a Stop during a snapshot) would keep git from
    writing the refreshed copy ever again (never wrong, only slower): gone after a minute."""
    lock = index.with_name(index.name + ".lock")
    try:
        if time.time() - lock.stat().st_mtime > _KEEP_OLD_S:
            lock.unlink()
    except OSError:
        pass


def drop_bases(store: Path) -> None:
    """Forget every base (the next snapshot copies the user's index again)."""
    shutil.rmtree(store / "tolaria-base", ignore_errors=True)


def status(lay: Layout, base: Base, excludes: str, cancel: Cancel | None
           ) -> tuple[list[str], list[str], bytes]:
    """One walk: (tracked paths whose work-tree file differs from the base or is gone,
    untracked top entries as ``git ls-files --others --directory`` names them, stderr)."""
    argv = ["--git-dir", str(base.gitdir), "--work-tree", str(lay.top), "-C", str(lay.top),
            "-c", f"core.excludesFile={excludes}", "-c", "core.untrackedCache=true",
            "-c", "status.renames=false", "-c", "status.showUntrackedFiles=normal",
            "status", "--porcelain", "-z", "--no-renames", "--untracked-files=normal",
            "--ignore-submodules=dirty", "--ignored=no", "--no-ahead-behind"]
    env = safe_env({"GIT_INDEX_FILE": str(base.index), "GIT_OPTIONAL_LOCKS": "1"})
    done = run(argv, env=env, cancel=cancel, check=False)
    if done.returncode != 0:
        raise NotFast("git status cannot use the base index")
    changed: list[str] = []
    untracked: list[str] = []
    for record in done.stdout.split(b"\0"):
        if len(record) < 4:
            continue
        worktree, path = record[1:2], record[3:].decode(errors="surrogateescape")
        if record[:2] == b"??":
            untracked.append(path)
        elif record[:1] == b"U" or record[:2] in (b"AA", b"DD"):
            raise NotFast("a conflicted index")
        elif worktree != b" ":
            changed.append(path)
    return changed, untracked, done.stderr
