"""Tracked files whose bytes on disk are not the blob in the user's index (issue 21 item 2).

Git converts a file between the work tree and its index: a clean/smudge filter (Git LFS,
git-crypt), ``ident``, ``working-tree-encoding``, and line endings (``core.autocrlf``,
``eol=crlf``, ``text``/``text=auto``: the index holds LF, the disk CRLF). A snapshot starts from
a copy of the index, so such a file, even unchanged, would be recorded as its *cleaned* blob and
a Revert would write that over the real file. These files are hashed again from their work-tree
bytes (no filter); one too big to hash is left out (``Skipped.filtered``).

Which files: ``git check-attr`` in the user's repository (their attributes, read only) and their
``core.autocrlf`` (system, global and repository config, read only: ``git config`` runs
nothing); asked again only when the index, an attributes file or that setting changed.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from tolaria.core.checkpoints.gitrun import (
    CheckpointError,
    run,
    safe_env,
    user_config_env,
    user_global_values,
)
from tolaria.core.checkpoints.model import Limits
from tolaria.core.checkpoints.store import Layout
from tolaria.core.checkpoints.untracked import Git

_CONVERSIONS = re.compile(rb"\b(filter|ident|eol|text|working-tree-encoding)\b")
_ATTRIBUTES = ("filter", "ident", "eol", "text", "working-tree-encoding")
_NOT_SET = (b"unspecified", b"unset", b"")
_memo: dict[str, tuple[object, list[str]]] = {}


def converted(lay: Layout, git: Git, limits: Limits) -> tuple[list[str], tuple[str, ...]]:
    """The tracked files to hash from their work-tree bytes, and those too big for it."""
    autocrlf = eol_setting(lay.top) in ("true", "input")
    sources = _attribute_sources(lay, git)
    if not autocrlf and not any(_names_conversion(s) for s in sources):
        return [], ()
    key = (_stamp(lay.index), [_stamp(s) for s in sources], autocrlf)
    known = _memo.get(str(lay.top))
    if known is not None and known[0] == key:
        candidates = known[1]
    else:
        candidates = _candidates(lay, git, autocrlf)
        _memo[str(lay.top)] = (key, candidates)
    rehash: list[str] = []
    left_out: list[str] = []
    for name in candidates:
        try:
            size = os.lstat(lay.top / name).st_size
        except OSError:
            rehash.append(name)  # deleted: it stays deleted
            continue
        (left_out if size > limits.max_file_bytes else rehash).append(name)
    return rehash, tuple(left_out)


def _candidates(lay: Layout, git: Git, autocrlf: bool) -> list[str]:
    tracked = [p for p in git("ls-files", "-z").stdout.split(b"\0") if p]
    user_attributes = (user_global_values("core.attributesFile") or ["/dev/null"])[-1]
    done = run(["-C", str(lay.top), "-c", f"core.attributesFile={user_attributes}",
                "check-attr", "-z", "--stdin", *_ATTRIBUTES], env=safe_env(),
               stdin=b"\0".join(tracked) + b"\0")
    fields = done.stdout.split(b"\0")
    found: dict[str, None] = {}
    text: dict[bytes, bytes] = {}
    for path, attr, info in zip(fields[0::3], fields[1::3], fields[2::3], strict=False):
        if attr == b"text":
            text[path] = info
        if info not in _NOT_SET:
            found[path.decode(errors="surrogateescape")] = None
    if autocrlf:  # every file not marked binary (``-text``) may have its line endings converted
        for path in tracked:
            if text.get(path, b"unspecified") != b"unset":
                found[path.decode(errors="surrogateescape")] = None
    return list(found)


def _names_conversion(source: Path) -> bool:
    try:
        return _CONVERSIONS.search(source.read_bytes()) is not None
    except OSError:
        return False


def _stamp(path: Path) -> tuple[int, int, int]:
    try:
        info = os.stat(path)
    except OSError:
        return (0, 0, 0)
    return (info.st_mtime_ns, info.st_size, info.st_ino)


def _attribute_sources(lay: Layout, git: Git) -> list[Path]:
    """Every attributes file the user's git reads."""
    sources = [lay.common_dir / "info" / "attributes"]
    sources += [Path(p) for p in user_global_values("core.attributesFile")]
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    sources.append(Path(xdg) / "git" / "attributes")
    sources += [lay.top / p for p in _tracked_attributes(lay, git)]
    return sources


_attribute_files: dict[str, tuple[tuple[int, int, int], list[str]]] = {}


def _tracked_attributes(lay: Layout, git: Git) -> list[str]:
    """The tracked ``.gitattributes`` files, asked again only when the user's index changed."""
    stamp = _stamp(lay.index)
    known = _attribute_files.get(str(lay.index))
    if known is not None and known[0] == stamp and stamp != (0, 0, 0):
        return known[1]
    listed = git("ls-files", "-z", "--", ".gitattributes", "*/.gitattributes").stdout
    names = [p.decode(errors="surrogateescape") for p in listed.split(b"\0") if p]
    _attribute_files[str(lay.index)] = (stamp, names)
    return names


_settings: dict[str, tuple[float, str]] = {}


def eol_setting(top: Path) -> str:
    """The user's ``core.autocrlf`` for the work tree at ``top`` (system, global, repository
    config; '' unset), read again after 10 s."""
    known = _settings.get(str(top))
    if known is not None and time.monotonic() - known[0] < 10:
        return known[1]
    env = user_config_env()
    env.pop("GIT_CONFIG_NOSYSTEM", None)  # Git for Windows sets autocrlf in the system config
    try:
        done = run(["-C", str(top), "config", "--get", "core.autocrlf"], env=env, check=False,
                   timeout=10)
        value = done.stdout.decode(errors="replace").strip().lower() if done.returncode == 0 \
            else ""
    except CheckpointError:
        value = ""
    _settings[str(top)] = (time.monotonic(), value)
    return value
