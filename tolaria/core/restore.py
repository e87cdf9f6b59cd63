"""Putting files back from a checkpoint without losing what is there now (issue 21.1).

The primitives under Revert file / Revert hunk / Rewind / Undo (tolaria/chats/restore.py plans
with them): what a path holds now and in a checkpoint (``State``: a file's blob id and mode, a
symlink, a folder, a submodule, nothing), why a path cannot be written (a submodule, a file that
became a folder, no permission), a three-way merge that takes a turn's change out of a file
while keeping what was written after it, a safety snapshot that must hold the exact bytes of
every path about to be overwritten, and ``apply``, which writes a set of paths all or nothing
(a failure half-way puts the written ones back from the safety snapshot).

Everything reads checkpoints through ``tolaria.core.checkpoints`` (``ck.tree_entries``,
``ck.blob_bytes``, ``ck.snapshot``, ``ck.revert_file``): where checkpoints are stored is that
package's business. Hashes of the working tree are computed here, from the bytes on disk
(no git filters, no ``git add``), with the repository's object format. No Qt.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tolaria.core import checkpoints as ck
from tolaria.core.checkpoints import gitrun, hosted

#: State kinds. ``file`` and ``link`` can be written; the others block a restore.
FILE, LINK, MISSING = "file", "link", "missing"
FOLDER, SUBMODULE, UNREADABLE, SPECIAL, UNDER_FILE = (
    "folder", "submodule", "unreadable", "special", "under-file")
_CHUNK = 400  # paths per ls-tree call


@dataclass(frozen=True)
class State:
    """What one path holds: ``kind``, and for a file or link its git mode and blob id."""

    kind: str
    mode: str = ""
    sha: str = ""

    @property
    def exists(self) -> bool:
        return self.kind != MISSING

    def as_json(self) -> list[str]:
        return [self.kind, self.mode, self.sha]

    @classmethod
    def from_json(cls, value: object) -> State:
        if isinstance(value, list) and len(value) == 3 and all(isinstance(v, str) for v in value):
            return cls(value[0], value[1], value[2])
        return cls(MISSING)


ABSENT = State(MISSING)


class Changed(ck.CheckpointError):
    """A path changed between being looked at and being copied (``take_safety``)."""


def not_captured(checkpoint: ck.Checkpoint, path: str) -> bool:
    """Whether the snapshot left ``path`` out (too big, unreadable, a heavy folder: issue
    21.4), so its absence there says nothing about the file."""
    try:
        return ck.skipped_of(checkpoint).covers(path)
    except (ck.CheckpointError, OSError):
        return False


@lru_cache(maxsize=64)
def _object_format(repo: Path) -> str:
    done = ck.git(repo, "rev-parse", "--show-object-format", check=False)
    return done.stdout.decode().strip() or "sha1" if done.returncode == 0 else "sha1"


def blob_id(repo: Path, data: bytes) -> str:
    """The id git gives ``data`` as a blob in ``repo`` (sha1 or sha256), computed here."""
    digest = hashlib.sha256() if _object_format(repo) == "sha256" else hashlib.sha1()
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def inside(repo: Path, path: str) -> Path:
    """``repo / path``, refusing an absolute path or one that climbs out of the work tree."""
    if not path or Path(path).is_absolute() or ".." in Path(path).parts:
        raise ck.CheckpointError(f"{path or '(empty)'} is outside the working tree")
    return repo / path


def state_now(repo: Path, path: str) -> State:
    """What ``path`` holds in the working tree now (bytes as on disk, no git filters)."""
    if (host := hosted.current()) is not None:
        inside(repo, path)
        return State(*hosted.states(host, repo, [path])[0])
    target = inside(repo, path)
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return ABSENT
    except NotADirectoryError:
        return State(UNDER_FILE)
    if stat.S_ISLNK(info.st_mode):
        return State(LINK, "120000", blob_id(repo, os.fsencode(os.readlink(target))))
    if stat.S_ISDIR(info.st_mode):
        return State(SUBMODULE if (target / ".git").exists() else FOLDER)
    if not stat.S_ISREG(info.st_mode):
        return State(SPECIAL)
    try:
        sha = _file_id(repo, target)
    except PermissionError:
        return State(UNREADABLE)
    return State(FILE, "100755" if info.st_mode & stat.S_IXUSR else "100644", sha)


def states_now(repo: Path, paths: Sequence[str]) -> dict[str, State]:
    """``state_now`` of each path (on a host: one round trip for all of them)."""
    if (host := hosted.current()) is not None and paths:
        for path in paths:
            inside(repo, path)
        return {p: State(*s) for p, s in zip(paths, hosted.states(host, repo, list(paths)),
                                             strict=True)}
    return {path: state_now(repo, path) for path in paths}


def _file_id(repo: Path, target: Path) -> str:
    """``blob_id`` of a file's bytes, read in pieces (a 300 MB file is not held in memory)."""
    digest = hashlib.sha256() if _object_format(repo) == "sha256" else hashlib.sha1()
    with open(target, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        digest.update(b"blob %d\0" % size)
        read = 0
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            read += len(chunk)
    if read != size:  # written while being read: hash what is there now, whole
        return blob_id(repo, target.read_bytes())
    return digest.hexdigest()


def read_now(repo: Path, path: str) -> bytes:
    if (host := hosted.current()) is not None:
        return hosted.read(host, repo, inside(repo, path).relative_to(repo).as_posix())
    return inside(repo, path).read_bytes()


def states_at(checkpoint: ck.Checkpoint, paths: Iterable[str]) -> dict[str, State]:
    """What each of ``paths`` holds in ``checkpoint`` (ABSENT when it is not there)."""
    wanted = sorted(set(paths))
    found: dict[str, State] = dict.fromkeys(wanted, ABSENT)
    for start in range(0, len(wanted), _CHUNK):
        for mode, kind, sha, name in ck.tree_entries(checkpoint, wanted[start:start + _CHUNK]):
            if name in found:
                found[name] = State(SUBMODULE if kind == "commit" else
                                    LINK if mode == "120000" else FILE, mode, sha)
            else:  # a file under a wanted path: that path was a folder then
                for parent in Path(name).parents:
                    if str(parent) in found:
                        found[str(parent)] = State(FOLDER)
    return found


def blob(repo: Path, state: State) -> bytes:
    """The bytes of a file state of a checkpoint."""
    return ck.blob_bytes(repo, state.sha)


def merge_out(repo: Path, base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """``ours`` with the change ``base`` -> ``theirs`` applied (git merge-file, no attributes,
    no drivers); None when the two overlap or a side is binary."""
    if any(b"\0" in side for side in (base, ours, theirs)):
        return None
    with tempfile.TemporaryDirectory(prefix="tolaria-merge-") as tmp:
        names = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            (Path(tmp) / name).write_bytes(data)
            names.append(str(Path(tmp) / name))
        done = (ck.git(repo, "merge-file", "-p", "-q", *names, check=False)
                if hosted.current() is None else  # three local files: git needs no repository
                gitrun.run(["merge-file", "-p", "-q", *names], env=gitrun.safe_env(),
                           check=False))
    return done.stdout if done.returncode == 0 else None


def why_not(repo: Path, path: str, now: State, target: State) -> str:
    """Why ``path`` cannot be put to ``target`` (a reason for the user), or ""."""
    if target.kind == SUBMODULE:
        return ("is a submodule at that checkpoint: Tolaria does not move submodules "
                f"(git -C {path} checkout {target.sha[:12]} does)")
    if target.kind == FOLDER:
        return "was a folder at that checkpoint: not replaced"
    reasons = {SUBMODULE: "is a submodule now: not replaced", FOLDER: "is a folder now: not "
               "replaced", UNREADABLE: "cannot be read (permission): no copy could be kept",
               SPECIAL: "is not a regular file now (a socket or device): not replaced",
               UNDER_FILE: "a folder on its path is a file now: not replaced"}
    if now.kind in reasons:
        return reasons[now.kind]
    if hosted.current() is not None:  # the write there checks these, and says why it failed
        return ""
    target_path = inside(repo, path)
    if not _stays_inside(repo, target_path):
        return "a folder on its path leads outside the working tree (a symlink): not replaced"
    folder = target_path.parent
    while not folder.exists() and folder != repo:
        folder = folder.parent
    if folder.is_file():
        return f"{folder.relative_to(repo)} is a file now: not replaced"
    if not os.access(folder, os.W_OK | os.X_OK):
        where = "the top folder" if folder == repo else str(folder.relative_to(repo))
        return f"no permission to write in {where}"
    if now.kind == FILE and target.exists and not os.access(target_path, os.W_OK):
        return "is read-only: not replaced"
    return ""


@dataclass(frozen=True)
class Step:
    """One path to write: from ``source`` (a checkpoint; absent there = delete it), or
    ``data`` with ``mode`` (a merge's result)."""

    path: str
    source: ck.Checkpoint | None = None
    data: bytes | None = None
    mode: str = "100644"


def _stays_inside(repo: Path, target: Path) -> bool:
    """Whether ``target``'s folder, symlinks followed, is inside ``repo``."""
    try:
        return target.parent.resolve().is_relative_to(repo.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return False


def write_file(repo: Path, path: str, data: bytes, mode: str) -> None:
    """Replace ``path`` with ``data`` in one rename (readers see old or new, never neither)."""
    if (host := hosted.current()) is not None:  # checked there (symlinks followed there)
        hosted.write(host, repo, inside(repo, path).relative_to(repo).as_posix(), data, mode)
        return
    target = inside(repo, path)
    if not _stays_inside(repo, target):
        raise ck.CheckpointError(f"{path} is outside the working tree")
    tmp = target.with_name(f".{target.name}.tolaria-restore")
    tmp.unlink(missing_ok=True)
    tmp.write_bytes(data)
    os.chmod(tmp, 0o755 if mode == "100755" else 0o644)
    os.replace(tmp, target)


def apply(repo: Path, steps: Sequence[Step], safety: ck.Checkpoint) -> list[str]:
    """Write every step, or none: when one fails, the paths already written are put back from
    ``safety`` and CheckpointError says which path failed and why."""
    written: list[str] = []
    for step in steps:
        try:
            if step.data is not None:
                write_file(repo, step.path, step.data, step.mode)
            elif step.source is not None:
                ck.revert_file(step.source, step.path)
            written.append(step.path)
        except (ck.CheckpointError, OSError) as exc:
            for path in reversed([*written, step.path]):
                with suppress(ck.CheckpointError, OSError):
                    ck.revert_file(safety, path)
            raise ck.CheckpointError(f"{step.path}: {exc}. Nothing was changed (the files "
                                     "already written were put back).") from exc
    return written


def take_safety(folder: Path, ref: str, expected: dict[str, State],
                limits: ck.Limits | None = None) -> ck.Checkpoint:
    """A snapshot of the working tree now, checked to hold each path of ``expected`` exactly
    as it is expected to be (its bytes, so Undo can give them back). CheckpointError (and no
    snapshot kept) when one differs: it changed meanwhile, or it could not be snapshotted.
    ``limits``: the settings' (as the turn's own snapshots), so what they held it holds."""
    safety = ck.snapshot(folder, ref, limits=limits)
    kept = states_at(safety, expected)
    for path, want in sorted(expected.items()):
        have = kept.get(path, ABSENT)
        if (have.kind, have.sha) != (want.kind, want.sha) and want.kind in (FILE, LINK, MISSING):
            drop(safety)
            if state_now(safety.repo, path) != want:
                raise Changed(f"{path} changed while its copy was being kept: nothing was "
                              "changed")
            raise ck.CheckpointError(
                f"{path} could not be kept in the safety copy (too big, unreadable, or a "
                "filtered file whose snapshot is not its bytes), so it could not be given back "
                "by Undo: nothing was changed")
    return safety


def drop(checkpoint: ck.Checkpoint) -> None:
    """Forget a safety snapshot that is not needed after all (best effort)."""
    if checkpoint.ref:
        with suppress(ck.CheckpointError, OSError, ValueError):
            ck.delete(checkpoint.repo, checkpoint.ref)


def runs_in(repo: Path, runs: Iterable[dict[str, object]]) -> list[dict[str, object]]:
    """The runs (as ``tolaria streams`` lists them) whose working folder is inside ``repo``."""
    top = repo.resolve()
    found = []
    for run in runs:
        cwd = run.get("cwd")
        if isinstance(cwd, str) and cwd:
            with suppress(OSError, ValueError):
                if Path(cwd).resolve().is_relative_to(top):
                    found.append(run)
    return found


def other_processes_runs(timeout: float = 1.5) -> list[dict[str, object]]:
    """The live runs of every other Tolaria process of this user (their control sockets)."""
    from tolaria.core.process import control_client

    try:
        streams = control_client.list_streams(timeout=timeout)
    except OSError:
        return []
    return [s for s in streams if s.get("owner_pid") != os.getpid()]
