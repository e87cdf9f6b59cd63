"""Where checkpoints live: a bare repository of Tolaria's per user repository (ADR 0010).

``<data folder>/checkpoints/<name>-<digest>.git``, the digest that of the user's *common* git
folder (a linked worktree shares its main repository's store). Its ``objects/info/alternates``
names the user's object folder, so a snapshot stores only what git does not already have; the
commits, trees and new blobs and the refs (``refs/tolaria/<chat>/<turn>/before|after``) stay in
Tolaria's folder: ``git push --mirror``, ``git clone --mirror`` and ``git log --all`` of the user's
repository never see them.

Git runs there as ``git --git-dir=<store> --work-tree=<user's tree>`` with a copy of the user's
index (``GIT_INDEX_FILE``), so the user's ``.git/config`` and ``.git/info/attributes`` are not
read at all, and the store's ``info/attributes`` (highest precedence) unsets every conversion:
``filter``, ``text``/``eol``, ``ident``, ``working-tree-encoding``, ``diff`` drivers. Files are
stored and written back byte for byte. The user's ignore rules still hold: their
``.git/info/exclude`` is copied into the store's, their ``core.excludesFile`` is passed along.

Everything is derived from the work tree's path, so ``Checkpoint(repo, commit, ref)`` built from a
stored (repo, commit) pair needs nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tolaria.core.checkpoints.gitrun import (
    Cancel,
    CheckpointError,
    in_user_repo,
    run,
    run_listing,
    safe_env,
    user_config_env,
)
from tolaria.support import paths
from tolaria.support.tomlfile import write_atomic

#: Private namespace of every checkpoint ref (in Tolaria's store; before 2026-12 in the user's).
REF_PREFIX = "refs/tolaria/"
STORE_INFO = "tolaria-repo.json"
#: Highest-precedence attributes of the store: no conversion of any kind, no diff driver.
NEUTRAL_ATTRIBUTES = ("* -text !eol !filter -ident !diff !merge !working-tree-encoding "
                      "!export-subst\n")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_lock = threading.Lock()


@dataclass(frozen=True)
class Layout:
    """A work tree and the folders that belong to it."""

    #: The top of the user's work tree.
    top: Path
    #: The user's git folder that holds the objects and the config (shared by its worktrees).
    common_dir: Path
    #: The user's index of this work tree.
    index: Path
    #: Tolaria's store for ``common_dir``.
    store: Path
    object_format: str = "sha1"


def stores_dir() -> Path:
    return paths.data_dir() / "checkpoints"


def store_path(common_dir: Path) -> Path:
    real = os.path.realpath(common_dir)
    digest = hashlib.sha256(real.encode(errors="surrogateescape")).hexdigest()[:16]
    top = Path(real)
    name = top.parent.name if top.name == ".git" else top.name.removesuffix(".git")
    name = _UNSAFE_NAME.sub("_", name)[:40] or "repo"
    return stores_dir() / f"{name}-{digest}.git"


def layout(repo: Path, cancel: Cancel | None = None) -> Layout:
    """The layout of the work tree at (or above) ``repo``; CheckpointError when none."""
    done = in_user_repo(repo, "rev-parse", "--path-format=absolute", "--show-toplevel",
                        "--git-common-dir", "--git-path", "index", "--show-object-format",
                        cancel=cancel, check=False)
    lines = done.stdout.decode(errors="surrogateescape").splitlines()
    if done.returncode != 0 or len(lines) < 4:
        raise CheckpointError(f"{repo} is not inside a git working tree")
    common = Path(lines[1])
    return Layout(Path(lines[0]), common, Path(lines[2]), store_path(common), lines[3].strip())


def ensure_store(lay: Layout) -> Path:
    """Tolaria's store for ``lay`` (made on first use; the alternates kept pointing at the
    user's objects)."""
    store = lay.store
    with _lock:
        if not (store / "HEAD").is_file():
            _create(lay)
        alternates = store / "objects" / "info" / "alternates"
        want = f"{lay.common_dir / 'objects'}\n"
        if not alternates.is_file() or alternates.read_text(errors="replace") != want:
            _write(alternates, want)
        _remember_worktree(store, lay)
    return store


def _create(lay: Layout) -> None:
    paths.private_dir(stores_dir())
    tmp = Path(tempfile.mkdtemp(prefix=".new-", dir=stores_dir()))
    try:
        run(["init", "--quiet", "--bare", "--template=", str(tmp)], env=safe_env())
        settings = _user_core_settings(lay.top)
        text = "[core]\n\trepositoryformatversion = {}\n\tbare = true\n".format(
            1 if lay.object_format != "sha1" else 0)
        text += ("\tlogAllRefUpdates = false\n\tautocrlf = false\n\tsafecrlf = false\n"
                 "\thooksPath = /dev/null\n\tfsmonitor = false\n\tquotePath = false\n")
        text += "".join(f"\t{k} = {v}\n" for k, v in settings.items())
        text += "[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n"
        if lay.object_format != "sha1":
            text += f"[extensions]\n\tobjectFormat = {lay.object_format}\n"
        _write(tmp / "config", text)
        (tmp / "info").mkdir(exist_ok=True)
        _write(tmp / "info" / "attributes", NEUTRAL_ATTRIBUTES)
        _write(tmp / STORE_INFO, json.dumps({"common_dir": str(lay.common_dir),
                                             "worktrees": []}))
        try:
            os.rename(tmp, lay.store)
        except OSError:
            if not (lay.store / "HEAD").is_file():  # not another process's store: a real error
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _user_core_settings(top: Path) -> dict[str, str]:
    """The user's file-system settings that decide how the work tree is read (symlinks, modes,
    case): read, never executed."""
    done = in_user_repo(top, "config", "--null", "--get-regexp",
                        r"^core\.(filemode|symlinks|ignorecase|precomposeunicode)$", check=False)
    found: dict[str, str] = {}
    for entry in done.stdout.decode(errors="replace").split("\0"):
        key, _, value = entry.partition("\n")
        if key and value.strip().lower() in ("true", "false"):
            found[key.split(".", 1)[1]] = value.strip().lower()
    return found


def _remember_worktree(store: Path, lay: Layout) -> None:
    info = read_info(store)
    listed = info.get("worktrees")
    tops = [t for t in listed if isinstance(t, str)] if isinstance(listed, list) else []
    if str(lay.top) not in tops:
        info["worktrees"] = [*tops, str(lay.top)]
        info["common_dir"] = str(lay.common_dir)
        _write(store / STORE_INFO, json.dumps(info))


def read_info(store: Path) -> dict[str, object]:
    try:
        data = json.loads((store / STORE_INFO).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(target: Path, text: str) -> None:
    write_atomic(target, text)


def refresh_excludes(lay: Layout) -> str:
    """Copy the user's ``info/exclude`` into the store; the user's ``core.excludesFile`` (their
    global one or the repository's), to pass with ``-c core.excludesFile=``."""
    source = lay.common_dir / "info" / "exclude"
    try:
        text = source.read_text(errors="surrogateescape")
    except OSError:
        text = ""
    target = lay.store / "info" / "exclude"
    try:
        current = target.read_text(errors="surrogateescape")
    except OSError:
        current = None
    if current != text:
        target.parent.mkdir(exist_ok=True)
        tmp = target.with_name(f".exclude.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(text, errors="surrogateescape")
        os.replace(tmp, target)
    return user_excludes_file(lay.top)


_excludes: dict[tuple[str, str], tuple[float, str]] = {}


def user_excludes_file(top: Path) -> str:
    """The user's ``core.excludesFile`` as their own git would read it (system config aside),
    or git's default ``$XDG_CONFIG_HOME/git/ignore``; only read (``git config`` runs nothing).
    Read again after 10 s."""
    memo = (str(top), os.environ.get("HOME", ""))
    known = _excludes.get(memo)
    if known is not None and time.monotonic() - known[0] < 10:
        return known[1]
    value = _read_excludes_file(top)
    _excludes[memo] = (time.monotonic(), value)
    return value


def _read_excludes_file(top: Path) -> str:
    try:
        done = run(["-C", str(top), "config", "--path", "--get", "core.excludesFile"],
                   env=user_config_env(), check=False, timeout=10)
        value = done.stdout.decode(errors="surrogateescape").strip() if done.returncode == 0 \
            else ""
    except CheckpointError:  # no git, or it hung
        value = ""
    if not value:
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".config")
        value = os.path.join(xdg, "git", "ignore")
    return value if os.path.isfile(value) else "/dev/null"


def store_git(lay: Layout, *args: str, index: Path | None = None, excludes: str = "/dev/null",
              stdin: bytes | None = None, check: bool = True, cancel: Cancel | None = None,
              extra_env: Mapping[str, str] | None = None, timeout: float | None = None,
              ) -> subprocess.CompletedProcess[bytes]:
    """git in Tolaria's store with the user's work tree."""
    env = dict(extra_env or {})
    env["GIT_INDEX_FILE"] = str(index) if index is not None else str(lay.store / "index")
    argv = ["--git-dir", str(lay.store), "--work-tree", str(lay.top), "-C", str(lay.top),
            "-c", f"core.excludesFile={excludes}", *args]
    if timeout is None:
        return run(argv, env=safe_env(env), stdin=stdin, check=check, cancel=cancel)
    return run(argv, env=safe_env(env), stdin=stdin, check=check, cancel=cancel, timeout=timeout)


def store_listing(lay: Layout, *args: str, index: Path, excludes: str, most: int,
                  cancel: Cancel | None, timeout: float) -> tuple[list[bytes], bytes, bool]:
    """A NUL-separated listing in Tolaria's store, cut after ``most`` names (run_listing)."""
    argv = ["--git-dir", str(lay.store), "--work-tree", str(lay.top), "-C", str(lay.top),
            "-c", f"core.excludesFile={excludes}", *args]
    env = safe_env({"GIT_INDEX_FILE": str(index), "GIT_LITERAL_PATHSPECS": "1"})
    return run_listing(argv, env=env, most=most, cancel=cancel, timeout=timeout)


def legacy_refs(top: Path, prefix: str = REF_PREFIX) -> list[tuple[str, str]]:
    """Checkpoint refs an earlier Tolaria kept in the user's repository: (ref, commit)."""
    done = in_user_repo(top, "for-each-ref", "--format=%(refname) %(objectname)", prefix,
                        check=False)
    found = []
    for line in done.stdout.decode(errors="surrogateescape").splitlines():
        ref, _, sha = line.partition(" ")
        if ref.startswith(REF_PREFIX) and sha:
            found.append((ref, sha))
    return found


def store_of(repo: Path) -> Path:
    """Tolaria's store for the work tree at ``repo`` (it may not exist yet)."""
    return layout(repo).store
