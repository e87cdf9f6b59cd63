"""What checkpoints take on disk, per repository, and removing the ones no longer wanted.

Each store (tolaria/core/checkpoints/store.py) is measured by its own files (objects it wrote,
its refs; the user's objects it borrows are not counted) and by an earlier Tolaria's refs still
in the repository itself. ``prune`` deletes the refs it is told to, then the objects of Tolaria's
store that no ref reaches any more (only ones older than ``grace_s``, so a snapshot being taken
meanwhile keeps its new objects, and the cached ones it reuses: snap.py marks those used). The user's repository is never pruned: its objects are its
own; only an earlier Tolaria's refs there are deleted when asked.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tolaria.core.checkpoints.gitrun import CheckpointError, in_user_repo, run, safe_env
from tolaria.core.checkpoints.store import REF_PREFIX, legacy_refs, read_info, stores_dir
from tolaria.core.checkpoints.untracked import drop_caches


@dataclass(frozen=True)
class CheckpointRef:
    """One checkpoint ref: ``refs/tolaria/<chat>/<turn>/<before|after>``."""

    ref: str
    commit: str
    #: Where it lives: Tolaria's store, or the repository itself (an earlier Tolaria's).
    legacy: bool = False

    @property
    def chat_part(self) -> str:
        return self.ref[len(REF_PREFIX):].split("/", 1)[0]

    @property
    def turn_id(self) -> int | None:
        parts = self.ref[len(REF_PREFIX):].split("/")
        return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else None


@dataclass(frozen=True)
class StoreUsage:
    """One repository's checkpoints."""

    store: Path
    #: The repository's git folder (None when the store does not say).
    common_dir: Path | None
    #: The work trees that took snapshots into it.
    worktrees: tuple[Path, ...]
    #: Bytes of Tolaria's own files for it (objects and refs).
    size_bytes: int
    refs: tuple[CheckpointRef, ...]
    #: The repository is gone (moved or deleted): its checkpoints cannot be used.
    repo_missing: bool = False

    @property
    def repo(self) -> Path | None:
        """The main work tree (the git folder's parent for ``.git``), else the first one."""
        if self.common_dir is not None and self.common_dir.name == ".git":
            return self.common_dir.parent
        return self.worktrees[0] if self.worktrees else None


@dataclass(frozen=True)
class PruneResult:
    refs_deleted: int
    bytes_freed: int


def folder_bytes(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


def every_store() -> list[Path]:
    folder = stores_dir()
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.git") if (p / "HEAD").is_file())


def usage(store: Path) -> StoreUsage:
    """The size and refs of one store (and the repository's legacy refs)."""
    info = read_info(store)
    common = Path(str(info["common_dir"])) if isinstance(info.get("common_dir"), str) else None
    listed = info.get("worktrees")
    tops = tuple(Path(t) for t in listed if isinstance(t, str)) if isinstance(listed, list) else ()
    refs = list(_store_refs(store))
    missing = common is None or not (common / "objects").is_dir()
    if not missing:
        top = next((t for t in tops if t.is_dir()), None)
        if top is not None:
            with contextlib.suppress(CheckpointError):
                refs += [CheckpointRef(r, c, legacy=True) for r, c in legacy_refs(top)]
    return StoreUsage(store, common, tops, folder_bytes(store), tuple(refs), missing)


def _store_refs(store: Path) -> list[CheckpointRef]:
    done = run(["--git-dir", str(store), "for-each-ref", "--format=%(refname) %(objectname)",
                REF_PREFIX], env=safe_env(), check=False)
    found = []
    for line in done.stdout.decode(errors="surrogateescape").splitlines():
        ref, _, sha = line.partition(" ")
        if sha:
            found.append(CheckpointRef(ref, sha))
    return found


def prune(store: Path, drop: Callable[[CheckpointRef], bool], *, grace_s: float = 600.0,
          ) -> PruneResult:
    """Delete the refs ``drop`` picks (in the store, and an earlier Tolaria's in the
    repository), then the store's objects no ref reaches any more."""
    before = folder_bytes(store)
    found = usage(store)
    gone = [r for r in found.refs if drop(r)]
    mine = [r.ref for r in gone if not r.legacy]
    if mine:
        run(["--git-dir", str(store), "update-ref", "--stdin"], env=safe_env(),
            stdin="".join(f"delete {ref}\n" for ref in mine).encode())
    legacy = [r.ref for r in gone if r.legacy]
    top = next((t for t in found.worktrees if t.is_dir()), None)
    if legacy and top is not None:
        in_user_repo(top, "update-ref", "--stdin",
                     stdin="".join(f"delete {ref}\n" for ref in legacy).encode())
    left = [r for r in found.refs if r not in gone and not r.legacy]
    if not left and found.repo_missing:
        shutil.rmtree(store, ignore_errors=True)  # nothing to keep, nothing to borrow from
        return PruneResult(len(gone), before)
    drop_caches(store)  # the stat caches name blobs that may go now
    _drop_unreachable(store, grace_s)
    return PruneResult(len(gone), max(0, before - folder_bytes(store)))


def _drop_unreachable(store: Path, grace_s: float) -> None:
    """Delete the store's loose objects no ref reaches (tolerating objects the user's gc
    removed from under a checkpoint, which ``git prune`` would stop at)."""
    done = run(["--git-dir", str(store), "rev-list", "--objects", "--all",
                "--missing=allow-any"], env=safe_env(), timeout=600)
    reachable = {line.split(" ", 1)[0] for line in done.stdout.decode().splitlines()}
    cutoff = time.time() - grace_s
    objects = store / "objects"
    for sub in objects.glob("[0-9a-f][0-9a-f]"):
        for loose in sub.iterdir():
            sha = sub.name + loose.name
            try:
                if sha not in reachable and loose.stat().st_mtime < cutoff:
                    loose.unlink()
            except OSError:
                continue
        with contextlib.suppress(OSError):
            sub.rmdir()  # only when empty
