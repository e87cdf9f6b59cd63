"""The files (and folders) a chat's folder offers to ``@``: what git tracks plus what it does not
ignore, else a bounded walk that skips the usual heavy folders.

It runs on a worker thread (a monorepo's listing takes a while) and can be cancelled: git is
killed at once, the walk stops at its next folder. Paths are relative, ``/``-separated.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from tolaria.core.checkpoints.gitrun import (
    Cancel,
    CheckpointCancelled,
    CheckpointError,
    run,
    user_config_env,
)
from tolaria.core.remote.hostgit import walk_tree

#: Folders a walk never enters (build output, dependencies, caches, other tools' data).
HEAVY_FOLDERS = frozenset({
    ".git", ".hg", ".svn", ".jj", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".tox", ".nox", "target", "dist", "build", ".next", ".nuxt",
    ".cache", ".gradle", ".idea", ".terraform", "bower_components", ".direnv", ".eggs",
    "site-packages", "coverage", ".parcel-cache", ".turbo", "out",
})
#: A walk lists at most this many entries (files and folders) ...
WALK_LIMIT = 200_000
#: ... and stops after this long.
WALK_SECONDS = 10.0
#: git may list for this long before it is killed (and the walk is not tried either).
GIT_SECONDS = 30.0


@dataclass(frozen=True)
class Listing:
    """What ``@`` can offer in ``root``."""

    root: str
    files: tuple[str, ...]
    folders: tuple[str, ...]
    #: ``"git"`` or ``"walk"``.
    source: str
    #: The walk stopped at its limit: some files are not offered.
    truncated: bool = False


def list_folder(root: str, cancel: Cancel | None = None, *, limit: int = WALK_LIMIT) -> Listing:
    """The listing of ``root`` (git's when it is in a work tree, else the walk's).
    Raises ``CheckpointCancelled`` when cancelled, ``OSError`` when ``root`` is not a folder."""
    if not os.path.isdir(root):
        raise NotADirectoryError(f"{root} is not a folder")
    files = git_files(root, cancel)
    if files is not None:
        return Listing(root, files, folders_of(files), "git")
    return walk(root, cancel, limit=limit)


def git_files(root: str, cancel: Cancel | None = None) -> tuple[str, ...] | None:
    """Tracked plus untracked-not-ignored files under ``root``; None if it is no git work tree
    (or git is missing or failed). The user's own excludes apply (their global config is read;
    git runs no hook or filter for ``ls-files``)."""
    try:
        done = run(["-C", root, "ls-files", "-co", "--exclude-standard", "-z"],
                   env=user_config_env(), check=False, cancel=cancel, timeout=GIT_SECONDS,
                   what="ls-files")
    except CheckpointCancelled:
        raise
    except CheckpointError:  # no git, or it hung
        return None
    if done.returncode != 0:
        return None
    names = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    # -c and -o can name a path twice (a deleted tracked file is still "cached").
    return tuple(dict.fromkeys(n for n in names if n))


def folders_of(files: Iterable[str]) -> tuple[str, ...]:
    """Every folder holding one of ``files`` (``a/b/c.py`` -> ``a``, ``a/b``)."""
    seen: set[str] = set()
    for name in files:
        cut = name.rfind("/")
        while cut > 0:
            folder = name[:cut]
            if folder in seen:
                break
            seen.add(folder)
            cut = folder.rfind("/")
    return tuple(sorted(seen))


def walk(root: str, cancel: Cancel | None = None, *, limit: int = WALK_LIMIT,
         seconds: float = WALK_SECONDS) -> Listing:
    """Breadth first, no symlinked folder followed, heavy folders skipped, at most ``limit``
    entries or ``seconds`` (the same walk runs on a host: hostgit.walk_tree)."""
    stopped = None if cancel is None else (lambda: cancel.is_set)
    files, folders, truncated = walk_tree(root, HEAVY_FOLDERS, limit, seconds, stopped)
    if cancel is not None and cancel.is_set:
        raise CheckpointCancelled("listing the folder was cancelled")
    return Listing(root, tuple(files), tuple(folders), "walk", truncated)
