"""Running git so that it runs nothing of the repository's (issue 21, ADR 0010).

Every git call Tolaria makes goes through ``run``: no inherited ``GIT_*`` variable, no system
config, a global config of Tolaria's own (``GIT_CONFIG_GLOBAL``; the user's ``~/.gitconfig`` is
not read), and on the command line: no hooks, no fsmonitor, no pager, no credential helper, no
transport at all (``protocol.allow=never``, so ``core.sshCommand`` and proxies never start), no
auto-gc. Calls in the user's own repository (``git``: ``worktree add``, ``rev-parse``) also get
every filter driver the repository's config defines emptied (``filter.<name>.clean=`` ...), so a
checkout runs no clean/smudge/process command. Checkpoint calls do not read the user's config at
all: they run in Tolaria's store (tolaria/core/checkpoints/store.py).

A call can be cancelled from another thread (``Cancel``): git is killed at once and
``CheckpointCancelled`` raised. Each call has a time limit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tolaria.support import paths
from tolaria.support.tomlfile import write_atomic

GIT_TIMEOUT = 60.0
#: The tree with nothing in it (every git knows it without storing it).
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_POLL_S = 0.05
_IDENTITY = {"GIT_AUTHOR_NAME": "Tolaria", "GIT_AUTHOR_EMAIL": "tolaria@localhost",
             "GIT_COMMITTER_NAME": "Tolaria", "GIT_COMMITTER_EMAIL": "tolaria@localhost"}
#: Variables (besides every ``GIT_*``) that could make git start a program.
_DROP = ("SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", "EDITOR", "VISUAL", "PAGER", "LESS")
#: Config that turns off every command git could take from a repository's or user's config.
SAFE_CONFIG = (
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "core.pager=cat", "core.quotePath=false",
    "core.askPass=", "credential.helper=", "protocol.allow=never", "core.sshCommand=false",
    "core.gitProxy=", "diff.external=", "gc.auto=0", "maintenance.auto=false",
    "submodule.recurse=false", "core.untrackedCache=false", "core.attributesFile=/dev/null",
    "commit.gpgSign=false", "core.splitIndex=false", "feature.manyFiles=false",
)


class CheckpointError(Exception):
    """A git command failed, or a revert no longer applies; the message says which and why."""


class CheckpointCancelled(CheckpointError):
    """The call was cancelled (a Stop during a snapshot): git was killed."""


class GitTimeout(CheckpointError):
    """A git call ran past its time limit and was killed."""


class Cancel:
    """Set from any thread to kill the git call running under it (and refuse the next ones)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    @property
    def is_set(self) -> bool:
        return self._event.is_set()


def git_program() -> str:
    found = shutil.which("git")
    if found is None:
        raise CheckpointError("git is not installed")
    return found


_written: dict[str, Path] = {}
_written_lock = threading.Lock()


def tolaria_global_config() -> Path:
    """Tolaria's own global git config (``GIT_CONFIG_GLOBAL``): it defines no driver, helper or
    hook; only the user's ``safe.directory`` entries are copied in (their trust decisions).
    Written once per process and data folder."""
    key = str(paths.data_dir())
    with _written_lock:
        known = _written.get(key)
        if known is not None and known.is_file():
            return known
        target = _write_global_config()
        _written[key] = target
        return target


def _write_global_config() -> Path:
    folder = paths.private_dir(paths.data_dir() / "checkpoints")
    target = folder / "gitconfig"
    safe = user_global_values("safe.directory")
    text = "# Written by Tolaria: git as Tolaria runs it reads this instead of ~/.gitconfig.\n"
    if safe:
        text += "[safe]\n" + "".join(f"\tdirectory = {_quote(v)}\n" for v in safe)
    if not target.is_file() or target.read_text(errors="replace") != text:
        write_atomic(target, text)
    return target


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


_remembered: dict[tuple[str, str], tuple[float, list[str]]] = {}


def user_global_values(key: str) -> list[str]:
    """The values of ``key`` in the user's own global config (read only: ``git config`` runs
    nothing). [] when unset or unreadable. Read again after 10 s."""
    memo = (key, os.environ.get("HOME", ""))
    known = _remembered.get(memo)
    if known is not None and time.monotonic() - known[0] < 10:
        return known[1]
    values = _read_user_global(key)
    _remembered[memo] = (time.monotonic(), values)
    return values


def _read_user_global(key: str) -> list[str]:
    # The user's own global config (no GIT_CONFIG_GLOBAL of ours); ``--global`` reads that
    # file alone (not run's ``-c`` settings).
    try:
        done = run(["config", "--global", "--path", "--get-all", key], env=user_config_env(),
                   check=False, timeout=10)
    except CheckpointError:  # no git, or it hung
        return []
    if done.returncode != 0:
        return []
    return [line for line in done.stdout.decode(errors="surrogateescape").splitlines() if line]


def user_config_env() -> dict[str, str]:
    """The environment for reading the user's own config (``git config``, which runs nothing):
    as ``safe_env`` but with the user's global config instead of Tolaria's."""
    return _base_env() | {"GIT_CONFIG_NOSYSTEM": "1"}


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GIT_") and k not in _DROP}
    env.update(_IDENTITY)
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_PAGER="cat",
               GIT_NO_REPLACE_OBJECTS="1", GIT_PROTOCOL_FROM_USER="0", GIT_LFS_SKIP_SMUDGE="1",
               GIT_ASKPASS="false", GIT_EDITOR="false", GIT_SSH_COMMAND="false")
    return env


def safe_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git call: nothing inherited that names a repository, an index or
    a program; no system config; Tolaria's global config."""
    env = _base_env()
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_CONFIG_GLOBAL"] = str(tolaria_global_config())
    if extra:
        env.update(extra)
    return env


def run(argv: Sequence[str], *, env: Mapping[str, str], stdin: bytes | None = None,
        check: bool = True, cancel: Cancel | None = None, timeout: float = GIT_TIMEOUT,
        what: str = "") -> subprocess.CompletedProcess[bytes]:
    """``git ARGV`` (after the safe config); killed when ``cancel`` is set or after ``timeout``."""
    name = what or next((a for a in argv if not a.startswith("-") and "=" not in a), "git")
    if cancel is not None and cancel.is_set:
        raise CheckpointCancelled(f"git {name} was cancelled")
    full = [git_program(), *(x for pair in SAFE_CONFIG for x in ("-c", pair)), *argv]
    try:
        proc = subprocess.Popen(full, stdin=subprocess.PIPE if stdin is not None
                                else subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=dict(env))
    except OSError as exc:
        raise CheckpointError(f"git {name} could not start: {exc}") from exc
    deadline = time.monotonic() + timeout
    feed = stdin
    while True:
        try:
            out, err = proc.communicate(feed, timeout=_POLL_S)
            break
        except subprocess.TimeoutExpired:
            feed = None  # communicate() keeps what it had not written yet
            late = time.monotonic() > deadline
            if late or (cancel is not None and cancel.is_set):
                proc.kill()
                proc.communicate()
                if late:
                    raise GitTimeout(
                        f"git {name} took longer than {timeout:.0f} s") from None
                raise CheckpointCancelled(f"git {name} was cancelled") from None
    done = subprocess.CompletedProcess(full, proc.returncode, out, err)
    if check and done.returncode != 0:
        why = err.decode(errors="replace").strip().splitlines()
        raise CheckpointError(f"git {name} failed: {why[-1] if why else done.returncode}")
    return done


def run_listing(argv: Sequence[str], *, env: Mapping[str, str], most: int,
                cancel: Cancel | None = None, timeout: float = GIT_TIMEOUT,
                ) -> tuple[list[bytes], bytes, bool]:
    """``git ARGV`` whose output is NUL-separated names, read as it comes and cut (git killed)
    after ``most`` names: (names, stderr, cut). A huge listing costs only what is read."""
    import tempfile

    if cancel is not None and cancel.is_set:
        raise CheckpointCancelled("git was cancelled")
    full = [git_program(), *(x for pair in SAFE_CONFIG for x in ("-c", pair)), *argv]
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=errors, env=dict(env))
        assert proc.stdout is not None
        names: list[bytes] = []
        pending = b""
        cut = False
        try:
            import selectors

            with selectors.DefaultSelector() as watch:
                watch.register(proc.stdout, selectors.EVENT_READ)
                while True:
                    if cancel is not None and cancel.is_set:
                        raise CheckpointCancelled("git was cancelled")
                    if time.monotonic() > deadline:
                        raise GitTimeout(f"git listing took longer than {timeout:.0f} s")
                    if not watch.select(_POLL_S):
                        continue
                    chunk = os.read(proc.stdout.fileno(), 1 << 16)
                    if not chunk:
                        break
                    parts = (pending + chunk).split(b"\0")
                    pending = parts.pop()
                    names += [p for p in parts if p]
                    if len(names) > most:
                        cut = True
                        break
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
            proc.wait()
        errors.seek(0)
        said = errors.read()
    if not cut and proc.returncode != 0:
        why = said.decode(errors="replace").strip().splitlines()
        raise CheckpointError(f"git ls-files failed: {why[-1] if why else proc.returncode}")
    if pending and not cut:
        names.append(pending)
    return names[:most] if cut else names, said, cut


def in_user_repo(repo: Path, *args: str, check: bool = True, neutral_filters: bool = False,
                 cancel: Cancel | None = None, stdin: bytes | None = None,
                 ) -> subprocess.CompletedProcess[bytes]:
    """git in the user's own repository (``-C repo``), with the safe config; with
    ``neutral_filters`` every filter driver of the repository's config emptied first."""
    overrides: list[str] = []
    if neutral_filters:
        for name in filter_drivers(repo):
            for key in ("clean", "smudge", "process"):
                overrides += ["-c", f"filter.{name}.{key}="]
            overrides += ["-c", f"filter.{name}.required=false"]
    return run(["-C", str(repo), *overrides, *args], env=safe_env(), check=check, cancel=cancel,
               stdin=stdin)


def filter_drivers(repo: Path) -> list[str]:
    """The filter driver names the repository's config (and its includes) defines."""
    done = run(["-C", str(repo), "config", "--null", "--name-only", "--get-regexp",
                r"^filter\..*\.(clean|smudge|process|required)$"], env=safe_env(), check=False)
    names = []
    for key in done.stdout.decode(errors="surrogateescape").split("\0"):
        if key.startswith("filter.") and key.count(".") >= 2:
            names.append(key[len("filter."):key.rindex(".")])
    return sorted(set(names))
