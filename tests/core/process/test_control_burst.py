"""The control socket under a burst (issue 22.3): every client is answered, none reset.

Before: 1,000 ``list`` requests, 50 connections at a time, got 873 answers and 127
ECONNRESET: at 32 connections waiting, the server dropped the oldest for each newcomer, also
when its request was already there unread, and a ``tolaria abort`` caught in it was lost. Now
the listen queue holds the newcomers, only a client that has sent nothing is ever dropped (after
2 s, or after ``PRESSED_IDLE_S`` while others queue behind a full set), and the client retries a
reset or refused connection. Real processes and real Unix sockets throughout.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers import async_test, cli_env, marker_pids

from tolaria.core.process import control_client
from tolaria.core.process.control import ControlServer
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id

FAKES = Path(__file__).resolve().parents[2] / "fakes"
ROOT = FAKES.parents[1]


def _tolaria(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "tolaria"), *args],
                          env=cli_env(home), cwd=home, capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_burst_of_1000_requests_50_at_a_time_is_answered_with_an_abort_in_it(
        tolaria_home: Path) -> None:
    """5 client processes × 10 connections at a time × 20 requests each against a process
    that owns two runs, and ``tolaria abort`` of one of them started with the burst: all
    1,000 answered, no reset; the abort says true, that run's tree is gone, the other lives."""
    env = cli_env(tolaria_home)
    host = subprocess.Popen([sys.executable, str(FAKES / "control_host.py")], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    clients: list[subprocess.Popen[str]] = []
    try:
        assert host.stdout is not None and host.stdin is not None
        ready = json.loads(host.stdout.readline())
        aborted, other = ready["streams"]
        path = tolaria_home / "run" / f"{ready['pid']}.sock"
        gate = tolaria_home / "go"
        clients = [subprocess.Popen([sys.executable, str(FAKES / "burst_client.py"), str(path),
                                     "10", "20", str(gate)], env=env, stdout=subprocess.PIPE,
                                    text=True) for _ in range(5)]
        time.sleep(0.5)  # let the clients start and wait at the gate
        abort: list[subprocess.CompletedProcess[str]] = []
        asker = threading.Thread(target=lambda: abort.append(_tolaria(tolaria_home, "abort",
                                                                      aborted)))
        gate.touch()
        abort_started = time.monotonic()
        asker.start()
        reports = [json.loads(c.communicate(timeout=120)[0]) for c in clients]
        asker.join(120)
        assert sum(r["ok"] for r in reports) == 1000, reports
        assert [r["errors"] for r in reports] == [{}] * 5
        burst_end = max(r["end"] for r in reports)
        assert abort_started < burst_end, "the abort did not start during the burst"
        assert (abort[0].returncode, abort[0].stdout.strip()) == (0, "true"), abort[0].stderr
        assert marker_pids(aborted) == []
        listed = json.loads(_tolaria(tolaria_home, "streams", "--json").stdout)
        assert [s["stream_id"] for s in listed] == [other]
        out, _ = host.communicate("", timeout=60)
        final = json.loads(out.splitlines()[-1])
        assert final["stop_reasons"] == ["cancelled", "cancelled"]
        assert final["dropped"] == 0  # nobody was dropped: every client sent its request
        assert marker_pids(other) == []
    finally:
        for proc in [*clients, host]:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def _read_line(sock: socket.socket) -> bytes:
    sock.settimeout(20)
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    return data


@async_test
async def test_requests_queued_behind_a_full_server_are_all_answered(tmp_path: Path) -> None:
    """100 clients connect and send while the server's loop is busy (they wait in the listen
    queue), at most 2 waiting at a time: the server takes them a few at a time, drops none."""
    server = ControlServer(ProcessRegistry(), folder=tmp_path, max_clients=2, idle_timeout=30)
    await server.start()
    socks = []
    try:
        for _ in range(100):  # the loop does not run meanwhile: all of them queue
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(server.path))
            sock.sendall(b'{"op": "list"}\n')
            socks.append(sock)
        replies = await asyncio.gather(*(asyncio.to_thread(_read_line, s) for s in socks))
        assert [json.loads(r)["ok"] for r in replies] == [True] * 100
        assert server.dropped == 0
    finally:
        for sock in socks:
            sock.close()
        await server.close()


@async_test
async def test_silent_clients_still_make_way_for_real_ones(tmp_path: Path) -> None:
    """The limit that protects against idle clients stays: with the waiting set full of
    clients that sent nothing, a real one queued behind them gets them dropped at once (not
    after the 30 s idle deadline) and is answered."""
    server = ControlServer(ProcessRegistry(), folder=tmp_path, max_clients=2, idle_timeout=30)
    await server.start()
    silent = []
    try:
        for _ in range(2):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(server.path))
            silent.append(sock)
        await asyncio.sleep(0.05)
        started = time.monotonic()
        answers = await asyncio.to_thread(control_client.ask_all, {"op": "list"}, 5.0, tmp_path)
        assert [a["ok"] for a in answers] == [True]
        assert time.monotonic() - started < 2
        assert server.dropped == 2
        for sock in silent:
            assert sock.recv(10) == b""  # closed by the server, nothing said
    finally:
        for sock in silent:
            sock.close()
        await server.close()


def _resetting_listener(path: Path, resets: int, seen: list[bytes]) -> socket.socket:
    """A listener at ``path`` that drops its first ``resets`` connections unread (a reset for
    a client that sent its request), then answers an abort as stopped."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)

    def serve() -> None:
        for n in range(resets + 1):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            if n < resets:
                time.sleep(0.01)  # the request is in, unread: close gives ECONNRESET
                conn.close()
                continue
            seen.append(conn.recv(4096))
            conn.sendall(b'{"ok": true, "stopped": true}\n')
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener


def test_the_abort_client_retries_a_reset_connection(tmp_path: Path) -> None:
    """The owner resets the abort's connection three times (as a server shedding clients
    would): the client tries again, with a backoff, and the fourth is answered."""
    stream_id = new_stream_id()
    seen: list[bytes] = []
    # Named after a live process (ours), as a Tolaria's socket is: a reset from a process
    # that is alive is worth another try; one whose process is gone is not.
    listener = _resetting_listener(tmp_path / f"{os.getpid()}.sock", 3, seen)
    try:
        started = time.monotonic()
        assert control_client.abort_remote(stream_id, tmp_path, 10.0) is True
        assert time.monotonic() - started < 3
        assert [json.loads(s)["stream_id"] for s in seen] == [stream_id]
    finally:
        listener.close()


def test_the_abort_client_does_not_retry_a_dead_owner(tmp_path: Path) -> None:
    """A socket file whose process is gone is refused at once: no retries, false, removed."""
    stale = tmp_path / "999999999.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(stale))
    listener.close()  # the file stays, nobody listens
    started = time.monotonic()
    assert control_client.abort_remote(new_stream_id(), tmp_path, 10.0) is False
    assert time.monotonic() - started < 1
    assert not stale.exists()


def test_a_refused_socket_of_a_living_pid_costs_little(tmp_path: Path) -> None:
    """A socket file whose pid is alive but where nobody listens (a dead Tolaria's pid reused
    by another program): refused is tried again only briefly, not for the reset window."""
    path = tmp_path / f"{os.getpid()}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.close()
    started = time.monotonic()
    assert control_client.abort_remote(new_stream_id(), tmp_path, 10.0) is False
    assert control_client.list_streams(tmp_path, 10.0) == []
    assert time.monotonic() - started < 1
