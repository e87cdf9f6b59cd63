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

import os
import re
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

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
from tolaria.core.checkpoints.store import Layout, refresh_excludes, store_git

_OPEN_ERROR = re.compile(r'open\("(.+)"\): ')
_INDEX_ERROR = re.compile(r"unable to (?:index|process|stat) (?:file |path )?'?(.+?)'?$")
_PROCESS_ERROR = re.compile(r"Unable to process path (.+)$")
_DIR_ERROR = re.compile(r"could not open directory '(.+)': ")
_CONVERSIONS = re.compile(rb"\b(filter|ident|eol|working-tree-encoding)\b")

Git = Callable[..., CompletedProcess[bytes]]


def write_tree(lay: Layout, limits: Limits, cancel: Cancel | None = None
               ) -> tuple[str, Skipped]:
    """The tree of the work tree now (in Tolaria's store) and what it left out."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tolaria-ckpt-") as tmp:
        index = Path(tmp) / "index"
        if lay.index.is_file():
            index.write_bytes(lay.index.read_bytes())
        excludes = refresh_excludes(lay)

        def git(*args: str, **kw: object) -> CompletedProcess[bytes]:
            return store_git(lay, *args, index=index, excludes=excludes, cancel=cancel, **kw)  # type: ignore[arg-type]

        unreadable: list[str] = []
        _tracked(lay, git, index, unreadable)
        filtered = _rehash_converted(lay, git, limits)
        files, skipped = _untracked(lay, git, limits, started, unreadable)
        if files:
            _add(git, files, unreadable)
        tree = git("write-tree").stdout.decode().strip()
    return tree, Skipped(skipped.large, skipped.heavy, tuple(dict.fromkeys(unreadable)),
                         skipped.over_budget, filtered, skipped.untracked_off,
                         limits.max_file_bytes)


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
    listed = git("ls-files", "-z", "--", ".gitattributes", "*/.gitattributes").stdout
    sources += [lay.top / p.decode(errors="surrogateescape") for p in listed.split(b"\0") if p]
    for source in sources:
        try:
            if _CONVERSIONS.search(source.read_bytes()):
                return True
        except OSError:
            continue
    return False


def _untracked(lay: Layout, git: Git, limits: Limits, started: float, unreadable: list[str]
               ) -> tuple[list[str], Skipped]:
    """The untracked, not ignored files to add, and what is left out of them."""
    off = Skipped(untracked_off=True, max_file_bytes=limits.max_file_bytes)

    def left() -> float:
        return limits.time_budget_s - (time.monotonic() - started)

    if left() <= 0:
        return [], off
    try:
        top = git("ls-files", "-z", "--others", "--exclude-standard", "--directory",
                  "--no-empty-directory", timeout=max(left(), 0.1))
        entries = _names(top.stdout)
        unreadable.extend(_error_paths(top.stderr))
        heavy = [e for e in entries if e.endswith("/") and
                 Path(e.rstrip("/")).name in limits.heavy_dirs]
        folders = [e for e in entries if e.endswith("/") and e not in heavy]
        files = [(e, e) for e in entries if not e.endswith("/")]
        for chunk in range(0, len(folders), 500):
            some = folders[chunk:chunk + 500]
            inside = git("ls-files", "-z", "--others", "--exclude-standard", "--", *some,
                         timeout=max(left(), 0.1), extra_env={"GIT_LITERAL_PATHSPECS": "1"})
            unreadable.extend(_error_paths(inside.stderr))
            tops = set(some)
            files += [(_entry_of(p, tops), p) for p in _names(inside.stdout)]
    except GitTimeout:
        return [], off
    except CheckpointCancelled:
        raise
    taken: list[str] = []
    large: list[str] = []
    over: list[str] = []
    count = size = 0
    for n, (entry, path) in enumerate(sorted(files, key=lambda pair: pair[1])):
        if n % 512 == 0 and left() <= 0:
            return [], off
        heavy_at = _heavy_prefix(path, limits.heavy_dirs)
        if heavy_at is not None:
            heavy.append(heavy_at)
            continue
        if path.endswith("/"):  # a repository inside the tree: recorded as its commit
            taken.append(path.rstrip("/"))
            continue
        try:
            info = os.lstat(lay.top / path)
        except OSError:
            continue  # gone meanwhile
        if stat.S_ISREG(info.st_mode):
            if info.st_size > limits.max_file_bytes:
                large.append(path)
                continue
            if not os.access(lay.top / path, os.R_OK):
                unreadable.append(path)
                continue
        if over or count + 1 > limits.max_files or size + info.st_size > limits.max_bytes:
            over.append(entry)
            continue
        count += 1
        size += info.st_size
        taken.append(path)
    return taken, Skipped(tuple(large), tuple(dict.fromkeys(heavy)), (),
                          tuple(dict.fromkeys(over)), max_file_bytes=limits.max_file_bytes)


def _names(out: bytes) -> list[str]:
    return [p.decode(errors="surrogateescape") for p in out.split(b"\0") if p]


def _entry_of(path: str, tops: set[str]) -> str:
    at = path.find("/")
    while at != -1:
        if path[:at + 1] in tops:
            return path[:at + 1]
        at = path.find("/", at + 1)
    return path


def _heavy_prefix(path: str, heavy: tuple[str, ...]) -> str | None:
    parts = path.rstrip("/").split("/")
    for i, part in enumerate(parts[:-1]):
        if part in heavy:
            return "/".join(parts[:i + 1]) + "/"
    return None


def _add(git: Git, files: list[str], unreadable: list[str]) -> None:
    """``update-index --add`` the files (no directory walk); one that git cannot read is left
    out and listed, and the rest added again."""
    pending = list(files)
    for _attempt in range(50):
        done = git("update-index", "--add", "-z", "--stdin", stdin=_nul(pending), check=False)
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
