"""Checkpoints of a folder on a host: the same operations, with git run there (ADR 0035).

The chats layer (snapshots around turns, the diff review, revert, rewind, Undo and their safety
rules) is the same for every folder; only where git and the file reads/writes run differs. A
caller that works on a remote chat's folder enters ``on_host(target)``; the public functions of
``ops`` and ``tolaria.core.restore`` then hand their work to this module, which runs it on the
host through hostgit.py (core/remote/hostcall.py): a snapshot is one ssh round trip (copy of the
user's index, add, write-tree, commit-tree, update-ref in a store there), each other operation
one more. The store there is Tolaria's own bare repository borrowing the repository's objects
(``~/.local/share/tolaria/checkpoints/stores/``), as locally (ADR 0010): nothing in the user's
refs, index or config changes; git runs with the same safe config.

A ``Checkpoint.repo`` of a hosted folder is the path on the host; it means nothing locally.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from tolaria.core.checkpoints.gitrun import (
    SAFE_CONFIG,
    Cancel,
    CheckpointCancelled,
    CheckpointError,
)
from tolaria.core.checkpoints.model import (
    Checkpoint,
    FileChange,
    Limits,
    Skipped,
    changes_of,
    entries_of,
    git_failure,
    skipped_of_message,
)
from tolaria.core.remote.hostcall import Cancelled, HostError, b64decode, b64encode, batch
from tolaria.core.remote.hosts import Target

_HOST: ContextVar[Target | None] = ContextVar("tolaria_checkpoints_host", default=None)


def current() -> Target | None:
    """The host whose folder the checkpoint functions work on now (None: this machine)."""
    return _HOST.get()


@contextlib.contextmanager
def on_host(target: Target | None) -> Iterator[None]:
    """Within it, checkpoints and restores work on ``target``'s folders (None: local)."""
    token = _HOST.set(target)
    try:
        yield
    finally:
        _HOST.reset(token)


def _call(target: Target, *ops: dict[str, Any], cancel: Cancel | None = None
          ) -> list[dict[str, Any]]:
    try:
        results = batch(target, ops, SAFE_CONFIG, cancel=cancel)
    except Cancelled:
        raise CheckpointCancelled(f"the snapshot on {target.label} was cancelled") from None
    except HostError as exc:
        raise CheckpointError(f"on {target.label}: {exc}") from exc
    for result in results:
        if "error" in result:
            raise CheckpointError(f"on {target.label}: {result['error']}")
    if len(results) != len(ops):
        raise CheckpointError(f"on {target.label}: the batch ended early")
    return results


def store_git(target: Target, repo: Path | str, *args: str, stdin: bytes = b"",
              ) -> tuple[int, bytes, bytes]:
    """``git ARGS`` in Tolaria's store on the host for the work tree ``repo``."""
    done = _call(target, {"op": "git", "folder": str(repo), "argv": list(args),
                          "stdin": b64encode(stdin)})[0]
    return int(done["rc"]), b64decode(done["out"]), b64decode(done["err"])


def _checked(target: Target, repo: Path | str, *args: str, stdin: bytes = b"") -> bytes:
    rc, out, err = store_git(target, repo, *args, stdin=stdin)
    if rc != 0:
        raise git_failure(args[0], err, rc)
    return out


def find_repo(target: Target, folder: str) -> Path | None:
    """The work tree's top there; None when it is not in one. CheckpointError when it is the
    home folder or / there (too wide to snapshot)."""
    try:
        done = _call(target, {"op": "repo", "folder": folder})[0]
    except CheckpointError:
        return None
    if done.get("wide"):
        raise CheckpointError(f"the home folder or / on {target.label} is too wide to track: "
                              "changes are not tracked (open the chat on a project folder)")
    top = done.get("top")
    return Path(top) if isinstance(top, str) else None


def snapshot(target: Target, folder: str, ref: str, limits: Limits,
             cancel: Cancel | None = None) -> Checkpoint:
    data = {k: v for k, v in dataclasses.asdict(limits).items()
            if k in ("max_file_bytes", "max_files", "max_bytes", "heavy_dirs")}
    done = _call(target, {"op": "snapshot", "folder": folder, "ref": ref, "limits": data},
                 cancel=cancel)[0]
    return Checkpoint(repo=Path(str(done["top"])),
                      commit=str(done["commit"]), ref=ref,
                      skipped=Skipped.from_json(done.get("skipped")))


def load(target: Target, folder: str, ref: str) -> Checkpoint | None:
    """The checkpoint under ``ref`` in the store there, or None."""
    top = find_repo(target, folder)
    if top is None:
        return None
    rc, out, _err = store_git(target, top, "rev-parse", "--verify", "--quiet",
                              f"{ref}^{{commit}}")
    if rc != 0:
        return None
    found = Checkpoint(top, out.decode().strip(), ref)
    return Checkpoint(top, found.commit, ref, skipped_of(target, found))


def skipped_of(target: Target, checkpoint: Checkpoint) -> Skipped:
    if checkpoint.skipped is not None:
        return checkpoint.skipped
    rc, out, _err = store_git(target, checkpoint.repo, "cat-file", "commit", checkpoint.commit)
    if rc != 0:
        return Skipped()
    return skipped_of_message(out.decode(errors="replace").partition("\n\n")[2])


def _now(target: Target, before: Checkpoint, limits: Limits | None) -> Checkpoint:
    return snapshot(target, str(before.repo), "", limits or Limits())


def changes(target: Target, before: Checkpoint, after: Checkpoint | None,
            limits: Limits | None) -> list[FileChange]:
    after = after if after is not None else _now(target, before, limits)
    before_skipped, after_skipped = skipped_of(target, before), skipped_of(target, after)
    out = _checked(target, before.repo, "diff-tree", "-r", "--no-renames", "--name-status",
                   "-z", before.commit, after.commit).decode(errors="surrogateescape")
    return changes_of(out, before_skipped, after_skipped)


def file_diff_bytes(target: Target, before: Checkpoint, after: Checkpoint | None,
                    path: str) -> bytes:
    after = after if after is not None else _now(target, before, None)
    return _checked(target, before.repo, "--literal-pathspecs", "diff", "--no-renames",
                    "--no-color", "--no-ext-diff", "--no-textconv", before.commit,
                    after.commit, "--", path)


def tree_entries(target: Target, checkpoint: Checkpoint, paths: Sequence[str]
                 ) -> list[tuple[str, str, str, str]]:
    if not paths:
        return []
    out = _checked(target, checkpoint.repo, "--literal-pathspecs", "ls-tree", "-r", "-z",
                   "--full-tree", checkpoint.commit, "--", *paths)
    return entries_of(out.decode(errors="surrogateescape"))


def blob_bytes(target: Target, repo: Path | str, sha: str) -> bytes:
    return _checked(target, repo, "cat-file", "blob", sha)


def revert_file(target: Target, before: Checkpoint, path: str) -> None:
    """Put ``path`` back as it was at ``before`` (deleting it if it did not exist then): the
    blob is read there and written there, in one rename."""
    listed = tree_entries(target, before, [path])
    if any(e[3].startswith(path + "/") for e in listed):
        raise CheckpointError(f"{path} was a folder at that checkpoint: not replaced")
    entries = [e for e in listed if e[3] == path]
    write: dict[str, Any] = {"op": "write", "repo": str(before.repo), "path": path}
    if not entries:
        if skipped_of(target, before).covers(path):
            raise CheckpointError(f"{path} was not captured before this turn: not deleted")
        _call(target, {**write, "delete": True})
        return
    mode, kind, sha, _name = entries[0]
    if kind != "blob":
        raise CheckpointError(f"{path} is a {kind} at that checkpoint: only files are restored")
    data = blob_bytes(target, before.repo, sha)
    _call(target, {**write, "data": b64encode(data), "mode": mode})


def revert_hunk(target: Target, before: Checkpoint, path: str, patch: bytes) -> None:
    rc, _out, _err = store_git(target, before.repo, "apply", "--reverse", "--whitespace=nowarn",
                               "-", stdin=patch)
    if rc != 0:
        raise CheckpointError(f"{path} has changed since this turn: that part no longer applies")


def delete(target: Target, repo: Path | str, prefix: str) -> int:
    out = _checked(target, repo, "for-each-ref", "--format=%(refname)", prefix)
    refs = out.decode(errors="surrogateescape").split()
    if refs:
        _checked(target, repo, "update-ref", "--stdin",
                 stdin="".join(f"delete {ref}\n" for ref in refs).encode())
    return len(refs)


def states(target: Target, repo: Path | str, paths: Sequence[str]) -> list[list[str]]:
    """[kind, mode, blob id] of each path in the work tree now (tolaria.core.restore.State)."""
    done = _call(target, {"op": "states", "repo": str(repo), "paths": list(paths)})[0]
    return [list(map(str, s)) for s in done["states"]]


def read(target: Target, repo: Path | str, path: str) -> bytes:
    return b64decode(_call(target, {"op": "read", "repo": str(repo), "path": path})[0]["data"])


def write(target: Target, repo: Path | str, path: str, data: bytes, mode: str) -> None:
    _call(target, {"op": "write", "repo": str(repo), "path": path, "data": b64encode(data),
                   "mode": mode})
