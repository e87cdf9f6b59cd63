"""Small POSIX pieces the supervisor and its watcher share: a non-blocking read, an exit code
from a wait status, the agent's program on PATH or through the login shell, the handler of a
signal ignored, a line to the watcher."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

# POSIX only: the imports follow the assert, so that mypy --platform win32 skips them too.
assert sys.platform != "win32", "the supervisor runs on POSIX hosts (its frames: any)"

from .frames import _CHUNK  # noqa: E402


def _read(fd: int) -> bytes | None:
    """What a non-blocking ``fd`` has: b"" at its end (or an error), None when nothing yet."""
    try:
        return os.read(fd, _CHUNK)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _resolve(program: str, env: dict[str, str]) -> str | None:
    """``program`` on PATH, else through the user's login shell (nvm, Homebrew, ~/.local)."""
    import shutil

    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    found = shutil.which(program, path=env.get("PATH"))
    if found:
        return found
    shell = env.get("SHELL") or "/bin/sh"
    try:
        out = subprocess.run([shell, "-lc", 'command -v "$0"', program], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10,
                             check=False).stdout.decode(errors="replace").strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[-1] if out and os.path.isabs(out[-1]) else None


def _ignore(_signum: int, _frame: object) -> None:
    """A signal the supervisor itself does not act on."""


def _tell(fd: int, line: bytes) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, line)

