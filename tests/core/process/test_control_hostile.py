"""The control socket against hostile neighbours (issue 14, case 14): a socket folder that is a
symlink or another user's, idle clients that never send a request, a flood of connections.
Real Unix sockets, bounded counts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import async_test, wait_until
from nonroot import other_uid_gid

from tolaria.core.process import control, control_client
from tolaria.core.process.control import ControlServer
from tolaria.core.process.registry import ProcessRegistry
from tolaria.support import paths


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_symlinked_socket_folder_in_tmp_is_refused_and_not_chmodded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: $TMPDIR/tolaria-<uid> was followed and its target chmodded 0700 (another user
    can plant that link in a shared /tmp, pointing at a folder of ours)."""
    monkeypatch.delenv("TOLARIA_HOME")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    target = tmp_path / "somebody-elses-choice"
    target.mkdir(mode=0o755)
    os.chmod(target, 0o755)
    (tmp_path / f"tolaria-{os.getuid()}").symlink_to(target)
    with pytest.raises(paths.UnsafeFolder, match="is a symlink; refusing"):
        paths.socket_dir()
    assert _mode(target) == 0o755
    with pytest.raises(paths.UnsafeFolder, match="is a symlink"):
        control.list_streams()


def test_a_socket_folder_that_is_a_file_is_refused(tolaria_home: Path) -> None:
    (tolaria_home / "run").write_text("")
    with pytest.raises(paths.UnsafeFolder, match="is not a folder"):
        paths.socket_dir()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a folder of another user")
def test_a_socket_folder_of_another_user_is_refused_not_chmodded(tolaria_home: Path) -> None:
    folder = tolaria_home / "run"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    os.chown(folder, *other_uid_gid())
    with pytest.raises(paths.UnsafeFolder, match="belongs to another user"):
        paths.socket_dir()
    assert _mode(folder) == 0o755


def test_our_own_loose_socket_folder_is_tightened(tolaria_home: Path) -> None:
    folder = tolaria_home / "run"
    folder.mkdir()
    os.chmod(folder, 0o755)
    assert paths.socket_dir() == folder
    assert _mode(folder) == 0o700


def _idle_clients(path: Path, count: int) -> list[socket.socket]:
    """``count`` connections that never send anything."""
    clients = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):  # a full backlog: still queued
            sock.connect(str(path))
        clients.append(sock)
    return clients


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server is done with this client: EOF, its last word, or a reset."""
    try:
        sock.recv(4096, socket.MSG_PEEK)
    except BlockingIOError:
        return False  # still open, nothing said
    except OSError:
        return True
    return True


@async_test
async def test_idle_clients_are_dropped_after_the_read_deadline(tmp_path: Path) -> None:
    server = ControlServer(ProcessRegistry(), folder=tmp_path, idle_timeout=0.3)
    await server.start()
    clients = _idle_clients(server.path, 10)
    try:
        await asyncio.sleep(0.1)
        assert server.clients == 10
        await wait_until(lambda: server.clients == 0, 5, "the idle clients to be dropped")
        assert all(_closed_by_server(c) for c in clients)
    finally:
        for client in clients:
            client.close()
        await server.close()


@async_test
async def test_a_flood_of_idle_clients_does_not_delay_a_real_one(tmp_path: Path) -> None:
    """Before: 1,100 idle connections made ``tolaria streams`` take 4.5 s (or list nothing),
    and the accept loop spun on EMFILE."""
    server = ControlServer(ProcessRegistry(), folder=tmp_path, max_clients=8, idle_timeout=30)
    await server.start()
    clients = _idle_clients(server.path, 300)
    try:
        await asyncio.sleep(0.3)  # let the server accept what it will
        assert server.clients <= 8
        started = time.monotonic()
        replies = await asyncio.gather(*(
            asyncio.to_thread(control_client.ask_all, {"op": "list"}, 5.0, tmp_path)
            for _ in range(5)))
        answers = [reply[0] if reply else None for reply in replies]
        took = time.monotonic() - started
        assert all(a is not None and a["ok"] for a in answers), answers
        assert took < 2.0, f"5 real clients took {took:.2f} s behind 300 idle ones"
        assert server.clients <= 8
    finally:
        for client in clients:
            client.close()
        await server.close()


#: In a child process (it takes every fd it has): start a run of the hanging fake agent, use
#: up all file descriptors, stop the run, report what happened as one JSON line.
_STOP_WITHOUT_FDS = """
import asyncio, json, os, resource, sys
sys.path.insert(0, sys.argv[1])
from helpers import fake_manifest, marker_pids, start_run
from tolaria.core.process.registry import ProcessRegistry

async def main():
    registry = ProcessRegistry()
    run = start_run(fake_manifest("hang"), registry=registry)
    while not marker_pids(run.stream_id):
        await asyncio.sleep(0.05)
    hog = []
    try:
        while True:
            hog.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    try:
        stopped = await asyncio.wait_for(registry.abort_and_wait(run.stream_id), 20)
        done = await run.finish()
        result = {"stopped": stopped, "reason": done.stop_reason,
                  "survivors": [s.pid for s in done.survivors]}
    except Exception as exc:
        import traceback
        result = {"error": repr(exc), "where": traceback.format_exc()[-1500:]}
    for fd in hog:
        os.close(fd)
    result["hogged"] = len(hog)
    result["left"] = marker_pids(run.stream_id)
    print(json.dumps(result))

resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
asyncio.run(main())
"""


@pytest.mark.usefixtures("process_backend")
def test_a_stop_works_when_the_process_is_out_of_fds() -> None:
    """Before: the stop path died with "OSError: [Errno 24] Too many open files: '/proc'" (the
    snapshot of the run's processes), the run's tree left running. Now one spare fd is freed
    for it (tolaria/core/process/fdspare.py): the run stops, nothing is left."""
    tests = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests)])}
    result = subprocess.run([sys.executable, "-c", _STOP_WITHOUT_FDS, str(tests)], env=env,
                            capture_output=True, text=True, timeout=60, check=False,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report.get("error") is None, report
    assert report["hogged"] > 50  # it really ran out of fds
    assert report == {"stopped": True, "reason": "cancelled", "survivors": [],
                      "hogged": report["hogged"], "left": []}


#: In a child process: a child to bind, every fd used up, then psutil's bare bind and the
#: turn's (tolaria/core/turns/process_turn.py bind_process, through the spare fd).
_BIND_WITHOUT_FDS = """
import json, os, resource, subprocess
import psutil
from tolaria.core.turns.process_turn import bind_process
child = subprocess.Popen(["sleep", "30"])
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
hog = []
try:
    while True:
        hog.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
try:
    psutil.Process(child.pid)
    plain = "bound"
except psutil.Error:
    plain = "psutil.Error"
except OSError as exc:
    plain = f"OSError {exc.errno}"
bound = bind_process(child.pid)
ok = bound is not None and bound.pid == child.pid
for fd in hog:
    os.close(fd)
child.kill()
child.wait()
print(json.dumps({"plain": plain, "bound": ok, "hogged": len(hog)}))
"""


def test_the_agent_is_bound_when_the_process_is_out_of_fds() -> None:
    """Before: ``psutil.Process(pid)`` of a just spawned agent raised OSError EMFILE (not a
    psutil.Error) when fds were exhausted, and the turn died before its stop could run (the
    flaky stop above). Now the bind goes through the spare fd."""
    result = subprocess.run([sys.executable, "-c", _BIND_WITHOUT_FDS], capture_output=True,
                            text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["hogged"] > 10
    assert report["plain"] == "OSError 24"  # what the turn used to meet
    assert report["bound"] is True
