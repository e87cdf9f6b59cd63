"""``tolaria run`` against hostile files and agent output (issue 14): a NUL byte that comes back
in the next turn's argv, a full disk, a read-only home, a socket folder of another user. Each
runs the real CLI in a child process; see docs/RELIABILITY.md "Hostile cases (issue 14)"."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest
from helpers import cli_env
from nonroot import other_uid_gid, tolaria_as_other_user, world_reachable_folder

from tolaria.core.store.db import Store

ROOT = Path(__file__).resolve().parents[2]

#: An agent that prints a NUL inside its answer, and echoes the prompt it got (its last argv).
NUL_AGENT = """
id = "nul-agent"
name = "NUL printer"
protocol = "lines"
command = ["{python}", "-c", "import os, sys; print('before\\\\x00after'); print('env: ' + os.environ['NULVAR']); print('got: ' + sys.argv[-1])", "{prompt}"]
env = { NULVAR = "in\\u0000env" }
"""


#: An agent that prints about 2 MB, then a last line: more than the small disks below hold.
FLOOD_AGENT = """
id = "flood"
protocol = "lines"
command = ["{python}", "-c", "for i in range(20000): print(f'{i:08d} ' + 'x' * 100)\\nprint('last line')", "{prompt}"]
"""


def cli(home: Path, *args: str, timeout: float = 60, preexec: Callable[[], None] | None = None,
        **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tolaria", *args], env=cli_env(home, **env),
                          cwd=home, capture_output=True, text=True, timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL, preexec_fn=preexec)


def test_a_nul_in_agent_output_does_not_break_the_next_chat_turn(tolaria_home: Path) -> None:
    """Before: the second turn died with ``ValueError: embedded null byte`` (the history, NUL
    included, goes into the agent's argv)."""
    (tolaria_home / "adapters").mkdir()
    (tolaria_home / "adapters" / "nul-agent.toml").write_text(NUL_AGENT)
    first = cli(tolaria_home, "run", "--agent", "nul-agent", "first question")
    assert first.returncode == 0, first.stderr
    assert "before\0after" in first.stdout  # what the agent printed, shown as it came
    assert "env: in\ufffdenv" in first.stdout  # a NUL in a manifest's env value, too
    chats = json.loads(cli(tolaria_home, "chats", "--json").stdout)
    assert len(chats) == 1

    second = cli(tolaria_home, "run", "--chat", str(chats[0]["id"]), "second question")
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr and "null byte" not in second.stderr
    got = second.stdout.split("got: ", 1)[1]
    assert "before\ufffdafter" in got  # the history reached the agent, the NUL replaced
    assert "second question" in got
    assert "\0" not in got


# --- a full disk mid-run -------------------------------------------------------------------


@contextlib.contextmanager
def _tmpfs(options: str, other_case: str) -> Iterator[Path]:
    """A real tmpfs mounted with ``options`` (root only; ``other_case`` runs for everyone)."""
    if os.getuid() != 0:
        pytest.skip(f"mounting a tmpfs needs root ({other_case} runs for everyone)")
    folder = Path(tempfile.mkdtemp(prefix="tolaria-tmpfs-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        folder.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)
        folder.rmdir()


def _limit_file_size() -> None:  # in the child: no file of it may grow past 200 kB
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))


def _assert_one_clear_error(run: subprocess.CompletedProcess[str], home: Path,
                            expected: str) -> None:
    assert run.returncode == 1, run.stderr
    assert run.stdout.rstrip().endswith("last line")  # the run's output, all of it
    lines = run.stderr.splitlines()
    assert lines[0].startswith("[done: end_turn,"), run.stderr
    assert lines[1:] == [f"tolaria: {expected}"], run.stderr  # once, nothing else
    crash_reports = home / "data" / "crash-reports"
    assert not crash_reports.exists() or not list(crash_reports.iterdir())


def _assert_store_readable(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with closing(Store(db)) as store:  # the turn that could not be finished: interrupted
        [conversation] = store.list_conversations()
        [turn] = store.turns(conversation.id)
        assert turn.status == "interrupted"


def test_a_full_disk_is_one_clear_error_after_the_output() -> None:
    """Before: "cannot rollback - no transaction is active" tracebacks masked "database or disk
    is full", a crash report was attempted, exit 1 right after ``done: end_turn``."""
    with _tmpfs("size=256k", "the RLIMIT_FSIZE case") as disk:  # a disk that fills up
        home = disk / "home"
        (home / "adapters").mkdir(parents=True)
        (home / "adapters" / "flood.toml").write_text(FLOOD_AGENT)
        run = cli(home, "run", "--agent", "flood", "fill the disk")
        db = home / "data" / "tolaria.sqlite3"
        _assert_one_clear_error(run, home, f"disk full: could not save the turn to {db}")
        subprocess.run(["mount", "-o", "remount,size=8m", str(disk)], check=True)
        _assert_store_readable(db)  # room again: the store opens, nothing corrupted


def test_a_file_size_limit_is_one_clear_error_after_the_output(tolaria_home: Path) -> None:
    """The same without root: RLIMIT_FSIZE makes the database's writes fail for real (EFBIG,
    which SQLite reports as a disk I/O error)."""
    (tolaria_home / "adapters").mkdir()
    (tolaria_home / "adapters" / "flood.toml").write_text(FLOOD_AGENT)
    run = cli(tolaria_home, "run", "--agent", "flood", "too big", preexec=_limit_file_size)
    db = tolaria_home / "data" / "tolaria.sqlite3"
    _assert_one_clear_error(run, tolaria_home, f"could not save the turn to {db}: disk I/O error")
    _assert_store_readable(db)


# --- the control socket under a flood of idle connections ---------------------------------


def _socket_of(home: Path, within: float = 30) -> Path:
    """The run's control socket, once it accepts connections."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for path in (home / "run").glob("*.sock") if (home / "run").is_dir() else []:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe, \
                    contextlib.suppress(OSError):
                probe.connect(str(path))
                return path
        time.sleep(0.05)
    raise AssertionError("tolaria run never opened its control socket")


def _few_fds() -> None:  # in the child: 32 file descriptors in all (EMFILE comes fast)
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))


def test_a_flood_of_idle_connections_neither_slows_streams_nor_breaks_stop(
        tolaria_home: Path) -> None:
    """Before: 1,100 idle connections to a ``tolaria run`` made ``streams`` list nothing after
    6 s, ``abort`` fail after 60 s (the run went on to its end) and the accept loop log EMFILE
    tracebacks. Now, with only 32 fds in the run's process: ``streams`` lists the run at once,
    ``abort`` stops it, the run exits 130 cleanly."""
    sid = "ai-agent-stream-idleflood01"
    env = cli_env(tolaria_home, TOLARIA_DEMO_TOOL_SECONDS="30")
    run = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--agent", "demo",
                            "--no-save", "--stream-id", sid, "hi"], env=env, cwd=tolaria_home,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, preexec_fn=_few_fds)
    idle: list[socket.socket] = []
    try:
        path = _socket_of(tolaria_home)
        deadline = time.monotonic() + 30
        while not any(s["state"] == "running" for s in json.loads(
                cli(tolaria_home, "streams", "--json").stdout)):  # the agent is up
            assert time.monotonic() < deadline, "the run never started its agent"
            time.sleep(0.1)
        for _ in range(1100):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):  # a full backlog: queued anyway
                sock.connect(str(path))
            idle.append(sock)
        started = time.monotonic()
        streams = cli(tolaria_home, "streams", "--json")
        took = time.monotonic() - started
        assert [s["stream_id"] for s in json.loads(streams.stdout)] == [sid], streams.stderr
        assert took < 4, f"streams took {took:.1f} s behind 1,100 idle connections"
        aborted = cli(tolaria_home, "abort", sid)
        assert (aborted.returncode, aborted.stdout.strip()) == (0, "true"), aborted.stderr
        _out, err = run.communicate(timeout=30)
    finally:
        for sock in idle:
            sock.close()
        if run.poll() is None:  # SIGTERM: the run stops its agent's tree, then exits
            run.terminate()
            try:
                run.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                run.kill()
                run.communicate()
    assert run.returncode == 130, err
    assert "Traceback" not in err and "out of system resource" not in err, err
    assert not (tolaria_home / "data" / "crash-reports").exists()


# --- a read-only home, a socket folder of another user -------------------------------------

#: Each command in a home it cannot write to; the path the error must name, under the home.
_READ_ONLY_CASES = [(("run", "--agent", "demo", "hi"), "data"),
                    (("run", "--agent", "demo", "--no-save", "hi"), "run"),
                    (("chats",), "data")]


def _assert_one_line(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"tolaria: {expected}"], result.stderr
    assert "Traceback" not in result.stderr


def test_a_read_only_home_is_one_line_not_a_traceback() -> None:
    """Before: ``tolaria run --no-save`` and ``streams`` in a home the user cannot write to
    died with a PermissionError traceback and tried to write a crash report. Run as a non-root
    user (root ignores the mode), the home chmod 0500."""
    with world_reachable_folder(owner_is_other_user=True) as folder:
        home = folder / "home"
        home.mkdir()
        if os.getuid() == 0:
            os.chown(home, *other_uid_gid())
        os.chmod(home, 0o500)
        for args, where in _READ_ONLY_CASES:
            result = tolaria_as_other_user(home, *args, TOLARIA_DEMO_DELAY="0")
            _assert_one_line(result, f"cannot write to {home / where}: permission denied")
        streams = tolaria_as_other_user(home, "streams")
        assert (streams.returncode, streams.stdout) == (0, "no live runs\n"), streams.stderr
        assert sorted(p.name for p in home.iterdir()) == []  # nothing written, no crash report


def test_a_read_only_file_system_is_one_line_not_a_traceback() -> None:
    with _tmpfs("ro,size=64k", "the chmod 0500 case") as home:  # root cannot write either
        for args, where in _READ_ONLY_CASES:
            result = cli(home, *args, TOLARIA_DEMO_DELAY="0")
            _assert_one_line(result, f"cannot write to {home / where}: read-only file system")


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a folder of another user")
def test_a_socket_folder_of_another_user_is_one_line_not_a_traceback(tolaria_home: Path) -> None:
    """Before: a PermissionError traceback and a crash report. Both ways round: our home's
    socket folder made another user's, and another user running ``streams`` on our home."""
    folder = tolaria_home / "run"
    folder.mkdir(mode=0o700)
    os.chown(folder, *other_uid_gid())
    refused = f"{folder} belongs to another user; refusing to use it for sockets"
    for args in (("run", "--agent", "demo", "--no-save", "hi"), ("streams",),
                 ("abort", "ai-agent-stream-notours01")):
        _assert_one_line(cli(tolaria_home, *args, TOLARIA_DEMO_DELAY="0"), refused)
    assert not (tolaria_home / "data").exists()  # no crash report either

    with world_reachable_folder() as shared:  # root's home, and another user asks it
        home = shared / "home"
        (home / "run").mkdir(parents=True, mode=0o700)
        os.chmod(home, 0o755)
        refused = f"{home / 'run'} belongs to another user; refusing to use it for sockets"
        for args in (("streams",), ("abort", "ai-agent-stream-notours01")):
            _assert_one_line(tolaria_as_other_user(home, *args), refused)
