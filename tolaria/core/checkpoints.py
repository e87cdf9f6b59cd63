"""Checkpoints: a git working folder's state before and after a turn, kept in private refs.

Why private refs: the user's index, branches and stash are theirs. A snapshot is written through
a throwaway index file (a copy of the real one, so git's stat cache keeps it fast), includes
untracked files (not ignored ones), and is kept as a commit under ``refs/tolaria/...``, which no
branch, ``git log`` or ``git stash`` shows and ``git gc`` keeps. Reverting writes files in the
working tree only (never ``git checkout``/``reset``, which would touch the index).

Non-git folders get no checkpoint (``find_repo`` returns None): the caller says so and offers
nothing that could lose work.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: Private namespace of every checkpoint ref.
REF_PREFIX = "refs/tolaria/"
_REF_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_GIT_TIMEOUT = 60.0
#: Environment that makes git ours alone: no inherited repository, index or editor.
_DROP_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
             "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_PREFIX", "GIT_NAMESPACE")
_IDENTITY = {"GIT_AUTHOR_NAME": "Tolaria", "GIT_AUTHOR_EMAIL": "tolaria@localhost",
             "GIT_COMMITTER_NAME": "Tolaria", "GIT_COMMITTER_EMAIL": "tolaria@localhost"}


class CheckpointError(Exception):
    """A git command failed, or a revert no longer applies; the message says which and why."""


@dataclass(frozen=True)
class Checkpoint:
    """One snapshot: the working tree's top folder and the commit that holds its files."""

    repo: Path
    commit: str
    ref: str


@dataclass(frozen=True)
class FileChange:
    """A file a turn changed: ``status`` is ``added``, ``modified``, ``deleted`` or ``type``."""

    path: str
    status: str


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk of a file's diff, with the file header it needs to be applied alone."""

    header: str
    body: str

    @property
    def patch(self) -> str:
        return self.header + self.body


_STATUS = {"A": "added", "M": "modified", "D": "deleted", "T": "type"}


def ref_name(*parts: str) -> str:
    """``refs/tolaria/<part>/<part>...``; each part a plain name (digits, letters, ``._-``)."""
    for part in parts:
        if not _REF_PART.match(part) or ".." in part or part.endswith((".lock", ".")):
            raise ValueError(f"not a valid checkpoint ref part: {part!r}")
    return REF_PREFIX + "/".join(parts)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    env.update(_IDENTITY)
    env["GIT_OPTIONAL_LOCKS"] = "0"  # read commands never rewrite the user's index
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    return env


def _git(repo: Path, *args: str, env: dict[str, str] | None = None,
         stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    git = shutil.which("git")
    if git is None:
        raise CheckpointError("git is not installed")
    argv = [git, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
            "-c", "core.quotepath=false", "-C", str(repo), *args]
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, env=env or _env(),
                              timeout=_GIT_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CheckpointError(f"git {args[0]} took longer than {_GIT_TIMEOUT:.0f} s") from exc
    if check and done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        raise CheckpointError(f"git {args[0]} failed: {why[-1] if why else done.returncode}")
    return done


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """Run git in ``repo`` the way checkpoints do (no hooks, no inherited repository, no
    prompt); CheckpointError says why it failed (tolaria/chats/worktrees.py uses it too)."""
    return _git(repo, *args, check=check)


def find_repo(folder: Path) -> Path | None:
    """The top of the git working tree that holds ``folder``, or None (no git, not a work tree)."""
    if shutil.which("git") is None or not folder.is_dir():
        return None
    try:
        done = _git(folder, "rev-parse", "--is-inside-work-tree", "--show-toplevel", check=False)
    except CheckpointError:
        return None
    lines = done.stdout.decode(errors="replace").splitlines()
    if done.returncode != 0 or len(lines) < 2 or lines[0] != "true":
        return None
    return Path(lines[1])


def snapshot(folder: Path, ref: str) -> Checkpoint:
    """Record the working tree (tracked and untracked, not ignored files) under ``ref``."""
    repo = find_repo(folder)
    if repo is None:
        raise CheckpointError(f"{folder} is not inside a git working tree")
    if not ref.startswith(REF_PREFIX):
        raise ValueError(f"checkpoint refs live under {REF_PREFIX}: {ref!r}")
    tree = _write_tree(repo)
    head = _git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    parents = ["-p", head.stdout.decode().strip()] if head.returncode == 0 else []
    commit = _git(repo, "commit-tree", tree, *parents, "-m", f"tolaria checkpoint {ref}")
    sha = commit.stdout.decode().strip()
    _git(repo, "update-ref", ref, sha)
    return Checkpoint(repo=repo, commit=sha, ref=ref)


def _write_tree(repo: Path) -> str:
    """The tree of the working tree now, built in a throwaway copy of the index."""
    real_index = Path(_git(repo, "rev-parse", "--path-format=absolute", "--git-path",
                           "index").stdout.decode().strip())
    with tempfile.TemporaryDirectory(prefix="tolaria-ckpt-") as tmp:
        index = Path(tmp) / "index"
        if real_index.is_file():
            shutil.copyfile(real_index, index)
        env = _env() | {"GIT_INDEX_FILE": str(index)}
        _git(repo, "add", "--all", "--ignore-errors", "--", ".", env=env)
        return _git(repo, "write-tree", env=env).stdout.decode().strip()


def load(folder: Path, ref: str) -> Checkpoint | None:
    """The checkpoint stored under ``ref``, or None when there is none."""
    repo = find_repo(folder)
    if repo is None:
        return None
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if done.returncode != 0:
        return None
    return Checkpoint(repo=repo, commit=done.stdout.decode().strip(), ref=ref)


def changes(before: Checkpoint, after: Checkpoint | None = None) -> list[FileChange]:
    """Files that differ between ``before`` and ``after`` (None: the working tree now)."""
    target = after.commit if after is not None else _write_tree(before.repo)
    out = _git(before.repo, "diff", "--no-renames", "--name-status", "-z", before.commit,
               target).stdout.decode(errors="surrogateescape")
    fields = out.split("\0")
    found: list[FileChange] = []
    for status, path in zip(fields[0::2], fields[1::2], strict=False):
        if status:
            found.append(FileChange(path=path, status=_STATUS.get(status[0], "modified")))
    return found


def file_diff(before: Checkpoint, after: Checkpoint | None, path: str) -> str:
    """The unified diff of one file (``after`` None: against the working tree now)."""
    target = after.commit if after is not None else _write_tree(before.repo)
    return _git(before.repo, "diff", "--no-renames", "--no-color", "--no-ext-diff", before.commit,
                target, "--", path).stdout.decode(errors="replace")


def hunks(diff: str) -> list[Hunk]:
    """Split one file's diff into hunks that ``git apply`` accepts one at a time."""
    lines = diff.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines))
    header = "".join(lines[:start])
    found: list[Hunk] = []
    body: list[str] = []
    for line in lines[start:]:
        if line.startswith("@@") and body:
            found.append(Hunk(header, "".join(body)))
            body = []
        body.append(line)
    if body:
        found.append(Hunk(header, "".join(body)))
    return found


def revert_file(before: Checkpoint, path: str) -> None:
    """Put ``path`` back as it was at ``before`` (deleting it if it did not exist then)."""
    target = _inside(before.repo, path)
    listed = _git(before.repo, "ls-tree", "-z", before.commit, "--", path).stdout.decode(
        errors="surrogateescape")
    if not listed:
        if target.is_symlink() or target.is_file():
            target.unlink()
        return
    meta, _, _name = listed.rstrip("\0").partition("\t")
    mode, kind, sha = meta.split()
    if kind != "blob":
        raise CheckpointError(f"{path} is a {kind} at that checkpoint: only files are restored")
    data = _git(before.repo, "cat-file", "blob", sha).stdout
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


def revert_hunk(before: Checkpoint, path: str, hunk: Hunk) -> None:
    """Undo one hunk of the turn's change to ``path`` in the working tree.

    Raises CheckpointError when the file has changed since so that the hunk no longer applies.
    """
    _inside(before.repo, path)
    done = _git(before.repo, "apply", "--reverse", "--whitespace=nowarn", "-",
                stdin=hunk.patch.encode(), check=False)
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
    """Delete every checkpoint ref under ``prefix`` (a chat's or a turn's); returns how many."""
    if not prefix.startswith(REF_PREFIX):
        raise ValueError(f"checkpoint refs live under {REF_PREFIX}: {prefix!r}")
    refs = _git(repo, "for-each-ref", "--format=%(refname)", prefix).stdout.decode().split()
    if refs:
        commands = "".join(f"delete {ref}\n" for ref in refs)
        _git(repo, "update-ref", "--stdin", stdin=commands.encode())
    return len(refs)


def _inside(repo: Path, path: str) -> Path:
    target = repo / path
    resolved_parent = target.parent.resolve()
    if not resolved_parent.is_relative_to(repo.resolve()) or Path(path).is_absolute():
        raise CheckpointError(f"{path} is outside the working tree")
    return target

