"""Snapshots, what changed between two, diffs and hunks as bytes, and writing files back.

Reverting writes files in the working tree only (never ``git checkout``/``reset``, which would
touch the user's index), byte for byte from the snapshot, one rename per file. A file the
snapshot did not capture (over the size cap, unreadable, in ``node_modules/``...) is never
deleted or overwritten on its behalf; content the user's ``git gc`` pruned from under a
checkpoint is a clear error naming the file, never another file's bytes.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tolaria.core.checkpoints import hosted
from tolaria.core.checkpoints.gitrun import Cancel, CheckpointError, in_user_repo
from tolaria.core.checkpoints.migrate import migrate_once
from tolaria.core.checkpoints.model import (
    Checkpoint,
    FileChange,
    Hunk,
    Limits,
    Skipped,
    changes_of,
    entries_of,
    git_failure,
    message_of,
    skipped_of_message,
)
from tolaria.core.checkpoints.snap import write_tree
from tolaria.core.checkpoints.store import (
    REF_PREFIX,
    Layout,
    ensure_store,
    layout,
    legacy_refs,
    store_git,
)

_REF_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def ref_name(*parts: str) -> str:
    """``refs/tolaria/<part>/<part>...``; each part a plain name (digits, letters, ``._-``)."""
    for part in parts:
        if not _REF_PART.match(part) or ".." in part or part.endswith((".lock", ".")):
            raise ValueError(f"not a valid checkpoint ref part: {part!r}")
    return REF_PREFIX + "/".join(parts)


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """Run git in the user's repository ``repo`` the way Tolaria must: nothing of the
    repository's runs (no hooks, filters, fsmonitor, pager, helpers, transports; see
    gitrun.py); CheckpointError says why it failed (tolaria/chats/worktrees.py uses it)."""
    return in_user_repo(repo, *args, check=check, neutral_filters=True)


def find_repo(folder: Path) -> Path | None:
    """The top of the git working tree that holds ``folder``, or None (no git, not a work tree)."""
    if (host := hosted.current()) is not None:
        return hosted.find_repo(host, str(folder))
    if not folder.is_dir():
        return None
    try:
        done = in_user_repo(folder, "rev-parse", "--is-inside-work-tree", "--show-toplevel",
                            check=False)
    except CheckpointError:
        return None
    lines = done.stdout.decode(errors="surrogateescape").splitlines()
    if done.returncode != 0 or len(lines) < 2 or lines[0] != "true":
        return None
    return Path(lines[1])


def _layout(folder: Path, cancel: Cancel | None = None) -> Layout:
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not inside a git working tree")
    lay = layout(folder, cancel)
    ensure_store(lay)
    migrate_once(lay, cancel)  # an earlier Tolaria's refs in the repository, into the store
    return lay


def snapshot(folder: Path, ref: str, *, limits: Limits | None = None,
             cancel: Cancel | None = None) -> Checkpoint:
    """Record the working tree (tracked and untracked, not ignored files, within ``limits``)
    under ``ref`` in Tolaria's store; ``cancel`` kills it (CheckpointCancelled)."""
    if not ref.startswith(REF_PREFIX):
        raise ValueError(f"checkpoint refs live under {REF_PREFIX}: {ref!r}")
    if (host := hosted.current()) is not None:
        return hosted.snapshot(host, str(folder), ref, limits or Limits(), cancel)
    lay = _layout(folder, cancel)
    limits = limits or Limits()
    tree, skipped = write_tree(lay, limits, cancel)
    commit = store_git(lay, "commit-tree", tree, stdin=message_of(ref, skipped).encode(),
                       cancel=cancel)
    sha = commit.stdout.decode().strip()
    store_git(lay, "update-ref", ref, sha, cancel=cancel)
    return Checkpoint(repo=lay.top, commit=sha, ref=ref, skipped=skipped)


def load(folder: Path, ref: str) -> Checkpoint | None:
    """The checkpoint stored under ``ref`` (in Tolaria's store, or an earlier Tolaria's ref in
    the repository itself), or None when there is none."""
    if (host := hosted.current()) is not None:
        return hosted.load(host, str(folder), ref)
    try:
        lay = _layout(folder)
    except CheckpointError:
        return None
    done = store_git(lay, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if done.returncode != 0:
        done = in_user_repo(lay.top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                            check=False)
        if done.returncode != 0:
            return None
    sha = done.stdout.decode().strip()
    return Checkpoint(repo=lay.top, commit=sha, ref=ref, skipped=skipped_of(
        Checkpoint(lay.top, sha, ref)))


def skipped_of(checkpoint: Checkpoint) -> Skipped:
    """What the snapshot left out (read from its commit when the Checkpoint was rebuilt)."""
    if checkpoint.skipped is not None:
        return checkpoint.skipped
    if (host := hosted.current()) is not None:
        return hosted.skipped_of(host, checkpoint)
    lay = _layout(checkpoint.repo)
    done = store_git(lay, "cat-file", "commit", checkpoint.commit, check=False)
    if done.returncode != 0:
        return Skipped()
    _headers, _, message = done.stdout.decode(errors="replace").partition("\n\n")
    return skipped_of_message(message)


def _now(before: Checkpoint, limits: Limits | None) -> tuple[Layout, str, Skipped]:
    lay = _layout(before.repo)
    tree, skipped = write_tree(lay, limits or Limits())
    return lay, tree, skipped


def changes(before: Checkpoint, after: Checkpoint | None = None, *,
            limits: Limits | None = None) -> list[FileChange]:
    """Files that differ between ``before`` and ``after`` (None: the working tree now). A file
    one side holds and the other left out (too big, unreadable, ...) is not a change."""
    if (host := hosted.current()) is not None:
        return hosted.changes(host, before, after, limits)
    if after is None:
        lay, target, after_skipped = _now(before, limits)
    else:
        lay, target, after_skipped = _layout(before.repo), after.commit, skipped_of(after)
    before_skipped = skipped_of(before)
    out = _checked(lay, "diff-tree", "-r", "--no-renames", "--name-status", "-z",
                   before.commit, target).stdout.decode(errors="surrogateescape")
    return changes_of(out, before_skipped, after_skipped)


def _checked(lay: Layout, *args: str) -> subprocess.CompletedProcess[bytes]:
    done = store_git(lay, *args, check=False)
    if done.returncode != 0:
        raise git_failure(args[0], done.stderr, done.returncode)
    return done


def file_diff_bytes(before: Checkpoint, after: Checkpoint | None, path: str) -> bytes:
    """The unified diff of one file as bytes (``after`` None: against the working tree now)."""
    if (host := hosted.current()) is not None:
        return hosted.file_diff_bytes(host, before, after, path)
    lay = _layout(before.repo)
    target = after.commit if after is not None else _now(before, None)[1]
    return _checked(lay, "--literal-pathspecs", "diff", "--no-renames", "--no-color",
                    "--no-ext-diff", "--no-textconv", before.commit, target, "--",
                    path).stdout


def file_diff(before: Checkpoint, after: Checkpoint | None, path: str) -> str:
    """The unified diff of one file, for showing (undecodable bytes replaced)."""
    return file_diff_bytes(before, after, path).decode(errors="replace")


def hunks(diff: str | bytes) -> list[Hunk]:
    """Split one file's diff into hunks that ``git apply`` accepts one at a time. Given bytes,
    each hunk keeps its exact bytes (``Hunk.raw``): a Latin-1 file reverts by hunk."""
    data = diff if isinstance(diff, bytes) else diff.encode(errors="surrogateescape")
    lines = data.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(b"@@")), len(lines))
    header = b"".join(lines[:start])
    parts: list[list[bytes]] = []
    for line in lines[start:]:
        if line.startswith(b"@@") or not parts:
            parts.append([])
        parts[-1].append(line)
    keep = isinstance(diff, bytes)
    return [Hunk(header.decode(errors="replace"), b"".join(body).decode(errors="replace"),
                 raw=header + b"".join(body) if keep else b"") for body in parts]


def _blob(lay: Layout, commit: str, path: str) -> tuple[str, str, str] | None:
    listed = _checked(lay, "--literal-pathspecs", "ls-tree", "-z", commit, "--",
                      path).stdout.decode(errors="surrogateescape")
    if not listed:
        return None
    meta, _, _name = listed.rstrip("\0").partition("\t")
    mode, kind, sha = meta.split()
    return mode, kind, sha


def tree_entries(checkpoint: Checkpoint, paths: Sequence[str]
                 ) -> list[tuple[str, str, str, str]]:
    """(mode, type, object id, path) of every entry at or under ``paths`` (from the work tree's
    top) in ``checkpoint``, files and submodules alike (``ls-tree -r``); [] for no paths."""
    if (host := hosted.current()) is not None:
        return hosted.tree_entries(host, checkpoint, paths)
    if not paths:
        return []
    lay = _layout(checkpoint.repo)
    out = _checked(lay, "--literal-pathspecs", "ls-tree", "-r", "-z", "--full-tree",
                   checkpoint.commit, "--", *paths).stdout.decode(errors="surrogateescape")
    return entries_of(out)


def blob_bytes(repo: Path, sha: str) -> bytes:
    """The bytes of blob ``sha`` of a checkpoint of the work tree ``repo`` (Tolaria's store,
    which borrows the repository's objects); CheckpointError when it is gone (git gc)."""
    if (host := hosted.current()) is not None:
        return hosted.blob_bytes(host, repo, sha)
    return _checked(_layout(repo), "cat-file", "blob", sha).stdout


def revert_file(before: Checkpoint, path: str) -> None:
    """Put ``path`` back as it was at ``before`` (deleting it if it did not exist then)."""
    if (host := hosted.current()) is not None:
        return hosted.revert_file(host, before, path)
    target = _inside(before.repo, path)
    lay = _layout(before.repo)
    entry = _blob(lay, before.commit, path)
    if entry is None:
        if skipped_of(before).covers(path):
            raise CheckpointError(f"{path} was not captured before this turn ({_why(before)}): "
                                  "not deleted")
        if target.is_symlink() or target.is_file():
            target.unlink()
        return
    mode, kind, sha = entry
    if kind != "blob":
        raise CheckpointError(f"{path} is a {kind} at that checkpoint: only files are restored")
    if target.exists() and not target.is_symlink() and not os.access(target, os.R_OK):
        raise CheckpointError(f"{path} is unreadable now: not replaced")
    done = store_git(lay, "cat-file", "blob", sha, check=False)
    if done.returncode != 0:
        raise CheckpointError(f"{path}: its content at that checkpoint is gone from the "
                              "repository (git gc removed it): the file was left as it is")
    data = done.stdout
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_dir() and not target.is_symlink():
        raise CheckpointError(f"{path} is a folder now: not replaced")
    tmp = target.with_name(f".{target.name}.tolaria-restore")
    tmp.unlink(missing_ok=True)
    if mode == "120000":
        os.symlink(data.decode(errors="surrogateescape"), tmp)
    else:
        tmp.write_bytes(data)
        os.chmod(tmp, 0o755 if mode == "100755" else 0o644)
    # One rename: whoever reads the file (an editor, the agent) sees the old or the new content,
    # never no file.
    os.replace(tmp, target)


def _why(checkpoint: Checkpoint) -> str:
    return skipped_of(checkpoint).summary().removeprefix("not tracked: ") or "left out"


def revert_hunk(before: Checkpoint, path: str, hunk: Hunk) -> None:
    """Undo one hunk of the turn's change to ``path`` in the working tree, byte for byte.

    Raises CheckpointError when the file has changed since so that the hunk no longer applies.
    """
    if (host := hosted.current()) is not None:
        return hosted.revert_hunk(host, before, path, hunk.patch_bytes)
    _inside(before.repo, path)
    lay = _layout(before.repo)
    done = store_git(lay, "apply", "--reverse", "--whitespace=nowarn", "-",
                     stdin=hunk.patch_bytes, check=False)
    if done.returncode != 0:
        raise CheckpointError(f"{path} has changed since this turn: that part no longer applies")


def rewind(before: Checkpoint) -> list[str]:
    """Make every file the turn (and anything since) changed match ``before``; returns them."""
    restored = []
    for change in changes(before):
        revert_file(before, change.path)
        restored.append(change.path)
    return restored


def delete(repo: Path, prefix: str) -> int:
    """Delete every checkpoint ref under ``prefix`` (a chat's or a turn's) in Tolaria's store,
    and an earlier Tolaria's refs under it in the repository itself; returns how many."""
    if not prefix.startswith(REF_PREFIX):
        raise ValueError(f"checkpoint refs live under {REF_PREFIX}: {prefix!r}")
    if (host := hosted.current()) is not None:
        return hosted.delete(host, repo, prefix)
    lay = _layout(repo)
    refs = store_git(lay, "for-each-ref", "--format=%(refname)", prefix).stdout.decode(
        errors="surrogateescape").split()
    if refs:
        store_git(lay, "update-ref", "--stdin",
                  stdin="".join(f"delete {ref}\n" for ref in refs).encode())
    old = [ref for ref, _sha in legacy_refs(lay.top, prefix)]
    if old:
        in_user_repo(lay.top, "update-ref", "--stdin",
                     stdin="".join(f"delete {ref}\n" for ref in old).encode())
    return len(refs) + len(old)


def _inside(repo: Path, path: str) -> Path:
    target = repo / path
    resolved_parent = target.parent.resolve()
    if not resolved_parent.is_relative_to(repo.resolve()) or Path(path).is_absolute():
        raise CheckpointError(f"{path} is outside the working tree")
    return target
