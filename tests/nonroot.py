"""Run a command as another, non-root user: file modes only mean something to non-root users
(root ignores them), and the suite runs as root in CI.

As root: the user ``tolaria-test`` is created once (``useradd -M -r``, idempotent) and commands
run under ``setpriv --reuid --regid --clear-groups``. As a non-root user: commands run directly
(we already are an "other" user to anything root made). Used by the io tests (file modes,
socket folders) and by tests/core/process/test_nonroot.py (the hostile-tree zoo without
root's /proc access).
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

USER = "tolaria-test"
ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def other_uid_gid() -> tuple[int, int]:
    """The uid and gid of the non-root test user (created when missing: a system user, no
    home, no login shell; a concurrent creation is fine too); root only."""
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        useradd = shutil.which("useradd") or "useradd"
        subprocess.run([useradd, "-M", "-r", "-s", "/usr/sbin/nologin", USER], check=False,
                       capture_output=True)
        try:
            entry = pwd.getpwnam(USER)
        except KeyError:
            pytest.skip(f"NOT TESTED AS NON-ROOT: cannot create the test user {USER!r} "
                        "(useradd missing or failed)")
    return entry.pw_uid, entry.pw_gid


def other_user_prefix() -> list[str]:
    """argv prefix that runs a command as the non-root test user ([] when we are not root)."""
    if os.getuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("NOT TESTED AS NON-ROOT: setpriv (util-linux) is needed to run a command "
                    "as another user")
    uid, gid = other_uid_gid()
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


def as_other_user(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                  cwd: Path | str = "/", timeout: float = 60,
                  ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*other_user_prefix(), *argv], env=dict(env or os.environ),
                          cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL)


def python_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment for running this checkout's ``tolaria`` as the other user."""
    pythonpath = [str(ROOT), *site.getsitepackages()]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOLARIA_", "PYTHON"))}
    env.update(TOLARIA_HOME=str(home), PYTHONPATH=os.pathsep.join(pythonpath), HOME=str(home),
               TMPDIR=str(home), PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def candidate_pythons() -> list[str]:
    """Pythons the other user may be able to run: ours first, then a system one of the same
    version (a pyenv interpreter or a venv under /root is out of an unprivileged user's reach)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    out = [sys.executable, os.path.realpath(sys.executable), getattr(sys, "_base_executable", "")]
    out += [shutil.which(version) or "", f"/usr/bin/{version}", f"/usr/local/bin/{version}",
            "/usr/bin/python3"]
    return list(dict.fromkeys(p for p in out if p and os.path.isfile(p)))


def first_runnable_python(probe: str, env: Mapping[str, str]) -> str | None:
    """The first of candidate_pythons() with which the other user runs ``python -c probe``
    in ``env`` (which sets the PYTHONPATH to try), or None."""
    for python in candidate_pythons():
        if as_other_user([python, "-c", probe], env=env).returncode == 0:
            return python
    return None


@functools.cache
def other_user_python() -> str:
    """An interpreter the other user can run this checkout with: this one if it works for
    them, else a system one of the same version."""
    if os.getuid() != 0:
        return sys.executable
    # It must also start itself again (the watchdog, agents): run by setpriv, an interpreter
    # under root's 0700 home may start once, but not its own children.
    python = first_runnable_python("import tolaria.cli.main, psutil, platformdirs, subprocess, sys;"
                                   " subprocess.run([sys.executable, '-c', ''], check=True)",
                                   python_env(Path("/")))
    if python is None:
        pytest.skip(f"no Python that {USER!r} can run with this checkout's packages")
    return python


def tolaria_as_other_user(home: Path, *args: str, timeout: float = 60,
                          **extra: str) -> subprocess.CompletedProcess[str]:
    """``python -m tolaria ARGS`` as the other user with ``TOLARIA_HOME=home``."""
    return as_other_user([other_user_python(), "-m", "tolaria", *args],
                         env=python_env(home, **extra), cwd=home, timeout=timeout)


@contextlib.contextmanager
def world_reachable_folder(owner_is_other_user: bool = False) -> Iterator[Path]:
    """A fresh folder under /tmp (mode 0755) that another user can reach (pytest's tmp_path
    lies under a 0700 folder, which would hide everything from them and prove nothing);
    ``owner_is_other_user``: handed to the test user (when root), for them to write in."""
    folder = Path(tempfile.mkdtemp(prefix="tolaria-peer-", dir="/tmp"))
    try:
        os.chmod(folder, 0o755)
        if owner_is_other_user and os.getuid() == 0:
            os.chown(folder, *other_uid_gid())
        yield folder
    finally:
        for path, _dirs, _files in os.walk(folder):  # a test may leave a 0500 folder
            with contextlib.suppress(OSError):
                os.chmod(path, 0o700)
        shutil.rmtree(folder, ignore_errors=True)
