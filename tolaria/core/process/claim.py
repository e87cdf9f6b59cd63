"""A ``tolaria run --stream-id ID`` claims its id before anything else, so an early abort is kept.

Before this, ``tolaria run`` listened on its control socket only ~200 ms after its process
started (imports, settings, the store): an abort sent from another terminal in that window
found nobody and the run went on for ever (issue 22.1). Two halves close the window:

- The run binds and listens on its control socket in the first lines of
  ``tolaria.cli.main.main``, before any heavy import (``claim_run``), under the name
  ``<socket_dir>/<pid>.claim``. A client that connects from then on waits in the socket's
  listen queue, its request in the socket's buffer, until the run's ``ControlServer`` adopts
  the socket (``take``) right after the run is reserved in the registry, renames it to
  ``<pid>.sock`` and takes every request already queued before the agent is spawned. Until
  then only an abort that names the run goes there: ``tolaria streams`` and the store's
  ``live_stream_ids`` ask ``*.sock`` only, so they never wait for a run that is starting (two
  runs starting at once would otherwise wait for each other).
- ``tolaria abort ID`` also finds a run whose process exists but has not claimed yet, by its
  command line (``find_runs``, through the process backend: ``/proc/*/cmdline`` with the linux
  one, psutil with the portable one), and then waits for that process's socket
  (tolaria/core/process/control_client.py).

Light on purpose, like the client: no asyncio, no pathlib, no re, and psutil only with the
portable backend (``tolaria abort``'s start-up is part of a stop's latency;
tests/cli/test_fast_commands.py pins that).
"""

from __future__ import annotations

import _socket
import os
import sys

from tolaria.core.process import backend
from tolaria.core.process.procread import env_value
from tolaria.core.stream_id import is_valid_stream_id
from tolaria.support import sockdir

#: Longer than any burst a desktop sees (50 clients at once); beyond it a client's connect
#: waits (``tolaria abort`` retries it). The kernel caps it at net.core.somaxconn.
BACKLOG = 128

#: ``tolaria``'s options before the command that take a value, and ``run``'s.
_TOP_VALUED = ("--agent", "--cwd")
_TOP_FLAGS = ("--version", "--help")
_RUN_VALUED = ("--agent", "--cwd", "--stream-id", "--grace", "--chat", "--max-time", "--max-cost",
               "--max-tokens", "--max-tool-calls", "--attach", "--host", "--ssh-config")
_RUN_FLAGS = ("--json", "--no-save", "--help", "--keep-running")

_claimed: _socket.socket | None = None
_claimed_path: str | None = None


def _option(arg: str, valued: tuple[str, ...], flags: tuple[str, ...]) -> str | None:
    """The option ``arg`` (without ``=value``) names, as argparse resolves an unambiguous
    prefix (``--stream`` is ``--stream-id``); None for no option or an ambiguous one."""
    known = valued + flags
    if arg in known:
        return arg
    matches = [name for name in known if name.startswith(arg)] if arg.startswith("--") else []
    return matches[0] if len(matches) == 1 else None


def run_args(args: list[str]) -> list[str] | None:
    """The arguments after ``run`` when ``args`` (tolaria's, without the program) is
    ``tolaria [--agent A] [--cwd D] run ...``, else None."""
    i = 0
    while i < len(args) and args[i] != "run":
        name, eq, _value = args[i].partition("=")
        option = _option(name, _TOP_VALUED, _TOP_FLAGS)
        if option not in _TOP_VALUED:
            return None  # another command, --help, --version
        i += 1 if eq else 2
    return args[i + 1:] if i < len(args) else None


def run_stream_id(args: list[str]) -> str | None:
    """The valid ID of ``tolaria ... run ... --stream-id ID ...`` in ``args`` (tolaria's
    arguments, without the program), else None."""
    rest = run_args(args)
    i = 0
    while rest is not None and i < len(rest):
        arg = rest[i]
        if arg == "--":
            return None
        if not arg.startswith("--"):  # the prompt, -h, a value of an unknown option
            i += 1
            continue
        name, eq, value = arg.partition("=")
        option = _option(name, _RUN_VALUED, _RUN_FLAGS)
        if option == "--stream-id":
            found = value if eq else (rest[i + 1] if i + 1 < len(rest) else None)
            return found if is_valid_stream_id(found) else None
        i += 2 if option in _RUN_VALUED and not eq else 1
    return None


def tolaria_args(argv: list[str]) -> list[str] | None:
    """Tolaria's arguments in a process's full command line, None when it is not Tolaria:
    ``tolaria ...`` run directly, ``python [options] .../tolaria ...`` (the script through
    its shebang), ``python -m tolaria ...`` and ``python -c '...tolaria...' ...``."""
    if not argv:
        return None
    program = os.path.basename(argv[0])
    if program == "tolaria":
        return argv[1:]
    if not program.startswith(("python", "pypy")):
        return None
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return argv[i + 2:] if argv[i + 1:i + 2] == ["tolaria"] else None
        if arg == "-mtolaria":
            return argv[i + 1:]
        if arg == "-c":
            return argv[i + 2:] if "tolaria" in "".join(argv[i + 1:i + 2]) else None
        if arg in ("-X", "-W", "--check-hash-based-pycs"):
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return argv[i + 1:] if os.path.basename(arg) == "tolaria" else None
    return None


# -- the run's side ---------------------------------------------------------------------------
def claim_run(args: list[str]) -> str | None:
    """When ``args`` is a ``run --stream-id ID``: listen on this process's control socket now
    (at ``<pid>.claim``), and return its path (None when not a run with an id, or when the
    folder cannot be used: the run's ControlServer then binds the socket later, as before, and
    reports the problem)."""
    global _claimed, _claimed_path
    if sys.platform == "win32":  # no AF_UNIX there, and runs are refused (ADR 0014)
        return None
    if _claimed is not None or run_stream_id(args) is None:
        return None
    try:
        folder = sockdir.socket_dir()
        sockdir.make_own_folder(folder)  # as paths.socket_dir() does
        path = claim_path(os.path.join(folder, f"{os.getpid()}.sock"))
        sock = listen(path)
    except (OSError, ImportError, AttributeError):  # platformdirs missing, no AF_UNIX: the
        return None  # run's ControlServer reports it
    _claimed, _claimed_path = sock, path
    return path


def listen(path: str) -> _socket.socket:
    """A Unix socket listening at ``path`` (a file left there by a dead process with our pid is
    replaced), mode 0600: the claim's, and the ControlServer's when nothing was claimed."""
    if sys.platform == "win32":  # no AF_UNIX in CPython there (ADR 0014: named pipes)
        raise OSError("no control channel on Windows yet")
    try:  # noqa: SIM105 - contextlib is one more import on the way to listening
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(BACKLOG)  # before the chmod: a client seeing the file can connect (the
        os.chmod(path, 0o600)  # folder is 0700, and the server checks the peer's uid)
    except BaseException:
        sock.close()
        raise
    return sock


def claim_path(socket_path: str) -> str:
    """Where the socket of ``<pid>.sock`` listens while its run starts: ``<pid>.claim``."""
    return socket_path.removesuffix(".sock") + ".claim"


def take(socket_path: str) -> int | None:
    """The listening socket claimed for ``socket_path`` (its fd, now the caller's, still at
    ``claim_path(socket_path)``: the caller renames it), else None."""
    global _claimed, _claimed_path
    if _claimed is None or _claimed_path != claim_path(socket_path):
        return None
    fd = _claimed.detach()
    _claimed = _claimed_path = None
    return fd


def release() -> None:
    """Close and remove a claimed socket nobody took (the run ended before it listened)."""
    global _claimed, _claimed_path
    if _claimed is None or _claimed_path is None:
        return
    _claimed.close()
    try:  # noqa: SIM105 - as above
        os.unlink(_claimed_path)
    except OSError:
        pass
    _claimed = _claimed_path = None


# -- the abort's side -------------------------------------------------------------------------
def start_ticks(pid: int) -> int | None:
    """The start time of a process (the backend's clock ticks after boot), None when gone."""
    return backend.current().start_ticks(pid)


def _our(name: str) -> bytes | None:
    value = os.environ.get(name)
    return None if value is None else os.fsencode(value)


def _same_home(pid: int) -> bool:
    """Whether process ``pid`` uses our socket folder: the same ``TOLARIA_HOME``, or neither
    has one and the variables the default folder comes from agree (sockdir.socket_dir)."""
    be = backend.current()
    env = be.environ(pid)
    if env is None:
        return True  # unreadable: judged by its socket alone
    theirs = env_value(env, b"TOLARIA_HOME")
    mine = sockdir.home()
    if not theirs:
        return mine is None and all(env_value(env, name.encode()) == _our(name)
                                    for name in ("XDG_RUNTIME_DIR", "TMPDIR", "TEMP", "TMP"))
    if mine is None:
        return False
    value = os.path.expanduser(os.fsdecode(theirs))
    if not os.path.isabs(value):
        folder = be.cwd(pid)
        if folder is None:
            return True
        value = os.path.join(folder, value)
    return os.path.realpath(value) == mine


def find_runs(stream_id: str) -> list[int]:
    """Pids of this user's ``tolaria run --stream-id STREAM_ID`` processes (same
    ``TOLARIA_HOME``), whether or not they listen yet. A process counts from its ``exec``:
    a launcher that has forked but not yet exec'd Tolaria has no such command line."""
    if sys.platform == "win32":  # no control channel there (ADR 0014): nothing to wait for
        return []
    be = backend.current()
    uid = os.getuid()
    me = os.getpid()
    found = []
    for pid in be.pids():
        if pid == me:
            continue
        argv = be.cmdline(pid)
        if argv is None or not any(stream_id in a for a in argv):  # almost all fail this
            continue
        args = tolaria_args(argv)
        if args is None or run_stream_id(args) != stream_id or be.real_uid(pid) != uid:
            continue
        if _same_home(pid):
            found.append(pid)
    return found
