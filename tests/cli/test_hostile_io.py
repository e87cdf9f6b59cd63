"""``tolaria run`` against hostile files and agent output (issue 14): a NUL byte that comes back
in the next turn's argv, a full disk, a read-only home, a socket folder of another user. Each
runs the real CLI in a child process; see docs/RELIABILITY.md "Hostile cases (issue 14)"."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

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
    full = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    full.update(TOLARIA_HOME=str(home), PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "tolaria", *args], env=full, cwd=home,
                          capture_output=True, text=True, timeout=timeout, check=False,
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
def _tiny_tmpfs() -> Iterator[Path]:
    """A 256 KiB tmpfs (root only): a disk that really fills up."""
    if os.getuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the RLIMIT_FSIZE case runs for everyone)")
    folder = Path(tempfile.mkdtemp(prefix="tolaria-full-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)],
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
    with _tiny_tmpfs() as disk:
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
