"""The PATH of the user's login shell, read once per process.

An app started from a desktop launcher or the Dock inherits a bare PATH: what ``~/.zshrc``,
``~/.bashrc`` or ``~/.profile`` add (nvm, Homebrew, ``~/.local/bin``) is missing, though the same
agent runs fine in the user's terminal. So we ask the shell: ``$SHELL -l -i -c`` (interactive
for bash and zsh, whose rc files are where nvm and most PATH edits live), with a short timeout.

The command is a constant of ours (only a random token varies): no user text ever passes
through the shell. Its rc files may print banners, so the value is wrapped in unique markers,
printed in two halves so that a shell echoing its own command line does not print them whole.
The shell gets its own session and is one of our own children (``proctree``); if it does not
answer in time, it and everything it started is killed and reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

from tolaria.core.process import proctree

LOGIN_SHELL_TIMEOUT_S = 3.0
#: After a kill, how long we wait for the shell to be reaped before giving up on it.
_REAP_S = 2.0


@dataclass(frozen=True)
class ShellPath:
    """What the login shell said: its PATH, or why there is none."""

    shell: str | None
    path: str | None
    error: str | None = None


_cache: dict[tuple[str, str], ShellPath] = {}
_pending: dict[tuple[str, str], asyncio.Task[ShellPath]] = {}


def clear_cache() -> None:
    """Forget every answer (tests; or after the user changed their shell setup)."""
    _cache.clear()


def login_shell(env: Mapping[str, str]) -> str | None:
    """The user's login shell: ``$SHELL``, else the one in the password database."""
    shell = env.get("SHELL")
    if shell:
        return shell
    if sys.platform == "win32":
        return None
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_shell or None
    except (ImportError, KeyError):
        return None


async def login_shell_path(env: Mapping[str, str] | None = None,
                           timeout: float = LOGIN_SHELL_TIMEOUT_S) -> ShellPath:
    """The login shell's PATH; asked once per (shell, HOME) and process, failures included."""
    env = os.environ if env is None else env
    shell = login_shell(env)
    if not shell or sys.platform == "win32":
        return ShellPath(None, None, "no login shell ($SHELL is not set)")
    key = (shell, env.get("HOME", ""))
    if key in _cache:
        return _cache[key]
    loop = asyncio.get_running_loop()
    task = _pending.get(key)
    if task is None or task.done() or task.get_loop() is not loop:
        # One probe shared by concurrent callers (``tolaria agents`` detects all agents at
        # once); it lives on even if the caller that started it is cancelled.
        task = loop.create_task(_ask(shell, env, timeout), name="login-shell-path")
        _pending[key] = task
        task.add_done_callback(lambda t: _remember(key, t))
    return await asyncio.shield(task)


def _remember(key: tuple[str, str], task: asyncio.Task[ShellPath]) -> None:
    if _pending.get(key) is task:
        del _pending[key]
    if not task.cancelled() and task.exception() is None:
        _cache[key] = task.result()


def shell_argv(shell: str, begin: str, end: str) -> list[str]:
    """The argv that makes ``shell`` print ``begin + PATH + end`` (markers split in halves)."""
    half_b, half_e = len(begin) // 2, len(end) // 2
    name = os.path.basename(shell)
    parts = f"'{begin[:half_b]}' '{begin[half_b:]}'", f"'{end[:half_e]}' '{end[half_e:]}'"
    value = "(string join : $PATH)" if name == "fish" else '"$PATH"'
    command = f"printf '%s%s%s%s%s' {parts[0]} {value} {parts[1]}"
    if name in ("bash", "zsh"):
        return [shell, "-l", "-i", "-c", command]
    if name in ("csh", "tcsh"):
        return [shell, "-c", command]  # csh takes -l only as its sole flag; -c reads .cshrc
    return [shell, "-l", "-c", command]


def _home_dir(env: Mapping[str, str]) -> str | None:
    home = env.get("HOME")
    return home if home and os.path.isdir(home) else None


def parse_output(text: str, begin: str, end: str) -> str | None:
    match = re.search(re.escape(begin) + r"(.*?)" + re.escape(end), text, re.DOTALL)
    if match is None:
        return None
    return match.group(1).strip() or None


async def _ask(shell: str, env: Mapping[str, str], timeout: float) -> ShellPath:
    token = secrets.token_hex(8)
    begin, end = f"__TOLARIA_PATH_{token}_BEGIN__", f"__TOLARIA_PATH_{token}_END__"
    shell_env = {k: v for k, v in env.items() if k != proctree.ENV_MARKER}
    try:
        proc = await asyncio.create_subprocess_exec(
            *shell_argv(shell, begin, end), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=shell_env,
            cwd=_home_dir(env), start_new_session=True)
    except OSError as exc:
        return ShellPath(shell, None, f"cannot run {shell}: {exc.strerror or exc}")
    # Ours on purpose: a stop of some run must never take it for an adopted orphan.
    proctree.remember_own_child(proc.pid)
    try:
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            return ShellPath(shell, None, f"{shell} did not print its PATH within {timeout:g} s")
    finally:
        if proc.returncode is None:
            await _kill(proc)
        proctree.forget_own_child(proc.pid)
    value = parse_output(out.decode(errors="replace"), begin, end)
    if value is None:
        return ShellPath(shell, None, f"{shell} exited with code {proc.returncode} without "
                                      "printing its PATH")
    return ShellPath(shell, value)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """Kill the shell, its process group and every descendant (rc files start things)."""
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        tree = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if sys.platform == "win32":  # no process groups there: the shell, then its tree
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    for child in tree:
        with contextlib.suppress(psutil.Error):
            child.kill()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), _REAP_S)
