"""One batch of operations on a host through the user's ssh (ADR 0035): Tolaria's git runner
there (hostgit.py, brought by the bootstrap like the supervisor) and the folder browser's
listing. Blocking, with time limits: callers run it off the GUI thread.

Every call is one connection (ssh's ControlMaster, when the user set it up, makes it cheap);
a batch of operations is one round trip. Errors are one line: ssh's own (unknown host,
authentication, host key), the bootstrap's, or the operation's.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any, Protocol

from tolaria.core.remote import bootstrap
from tolaria.core.remote.hosts import Target

#: Seconds a whole call may take (connection, bootstrap, the batch).
CALL_TIMEOUT_S = 90.0
#: Bytes of answer accepted (a diff, a file's bytes): beyond it the call fails.
MAX_ANSWER = 256 << 20
_OK = b"TOLARIA-OK"


class HostError(Exception):
    """The host could not be reached or the operation failed there; the message is one line."""


def b64decode(text: object) -> bytes:
    return base64.b64decode(str(text or "").encode("ascii"))


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def run_remote(target: Target, remote: Sequence[str], stdin: bytes = b"", *,
               timeout: float = CALL_TIMEOUT_S, most: int = MAX_ANSWER,
               cancel: CancelFlag | None = None) -> bytes:
    """``remote`` (argv) run on ``target`` with ``stdin``; its stdout. HostError on a non-zero
    exit (ssh's or the program's last stderr line), a timeout or an answer over ``most``;
    Cancelled (ssh killed) when ``cancel`` is set."""
    proc = _spawn(target, remote)
    try:
        out, err = _talk(proc, lambda _line: stdin, timeout, most, handshake=False,
                         cancel=cancel)
    finally:
        _reap(proc)
    if proc.returncode != 0:
        raise HostError(_why(target, err, proc.returncode))
    return out


class Cancelled(HostError):
    """The call was cancelled (``cancel.is_set``): ssh was killed."""


class CancelFlag(Protocol):
    @property
    def is_set(self) -> bool: ...


def batch(target: Target, ops: Sequence[dict[str, Any]], safe: Sequence[str] = (), *,
          timeout: float = CALL_TIMEOUT_S, cancel: CancelFlag | None = None,
          ) -> list[dict[str, Any]]:
    """Run ``ops`` on ``target`` through hostgit.py (one round trip); one result per op up to
    the first that failed (``{"error": ...}``). ``cancel`` set (from any thread): ssh is
    killed and Cancelled raised."""
    request = json.dumps({"ops": list(ops), "safe": list(safe)}).encode()
    remote = bootstrap.program_argv("hostgit", target.python, target.cache_dir)
    proc = _spawn(target, remote)

    def answer(line: bytes) -> bytes | None:
        if line == bootstrap.NEED:
            return bootstrap.program_bytes("hostgit")
        if line == _OK:
            return request
        if line.startswith(bootstrap.ERROR):
            raise HostError(line[len(bootstrap.ERROR):].decode(errors="replace"))
        return None

    try:
        out, err = _talk(proc, answer, timeout, MAX_ANSWER, handshake=True, cancel=cancel)
    finally:
        _reap(proc)
    lines = out.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise HostError(_why(target, err, proc.returncode))
    try:
        results = json.loads(lines[-1])["results"]
    except (ValueError, KeyError, TypeError):
        raise HostError(f"{target.label} gave an answer Tolaria cannot read") from None
    return [r if isinstance(r, dict) else {"error": "a malformed result"} for r in results]


def _spawn(target: Target, remote: Sequence[str]) -> subprocess.Popen[bytes]:
    try:
        # The window's askpass (ADR 0033) reaches the local ssh only, when the target has it.
        env = {**os.environ, **target.askpass_env} if target.askpass_env else None
        return subprocess.Popen(target.argv(remote), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env=env)
    except OSError as exc:
        raise HostError(f"cannot start ssh: {exc.strerror or exc}") from exc


def _reap(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    """Kill ssh and what it started in its session (``start_new_session``): an askpass helper
    waiting for the user's answer would keep its question open after ssh alone was killed."""
    if sys.platform != "win32":
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()


def _talk(proc: subprocess.Popen[bytes], answer: Any, timeout: float, most: int, *,
          handshake: bool, cancel: CancelFlag | None = None) -> tuple[bytes, bytes]:
    """Read stdout and stderr until both close; with ``handshake`` each first-phase stdout line
    is shown to ``answer``, whose bytes go to stdin (then stdin is closed); else ``answer``'s
    bytes go at once."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    pending = b"" if handshake else (answer(b"") or b"")
    if not handshake:
        _send(proc, pending)
        proc.stdin.close()
    talking = handshake
    with selectors.DefaultSelector() as watch:
        watch.register(proc.stdout, selectors.EVENT_READ, out)
        watch.register(proc.stderr, selectors.EVENT_READ, err)
        while watch.get_map():
            left = deadline - time.monotonic()
            if cancel is not None and cancel.is_set:
                _kill_session(proc)  # ssh and the askpass helper it runs for an open question
                raise Cancelled("cancelled")
            if left <= 0:
                proc.kill()
                raise HostError(f"the host did not answer within {timeout:.0f} s")
            for key, _mask in watch.select(min(left, 0.05)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    watch.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if len(out) > most:
                    proc.kill()
                    raise HostError(f"the host's answer is over {most >> 20} MB")
                while talking and b"\n" in out:
                    line = bytes(out).partition(b"\n")[0]
                    del out[:len(line) + 1]
                    sent = answer(line.strip())
                    if sent:
                        _send(proc, sent)
                    if line.strip() == _OK:
                        talking = False
                        proc.stdin.close()
    proc.wait(max(0.1, deadline - time.monotonic()))
    return bytes(out), bytes(err)


def _send(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    try:
        if data:
            proc.stdin.write(data)
        proc.stdin.flush()
    except (BrokenPipeError, ValueError):
        pass


def _why(target: Target, err: bytes, code: int | None) -> str:
    lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    if code == 127:
        return f"no {target.python} on {target.label} (exit 127)"
    said = lines[-1].strip() if lines else f"exit code {code}"
    return f"{target.label}: {said}"
