"""Crash reports (tolaria/support/crash.py): an unhandled exception in a real process leaves a report
under ``<data dir>/crash-reports/`` with the traceback and recent log lines, and never a secret.
See docs/RELIABILITY.md.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tolaria.support import crash

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-secret-123"
#: A secret that matches no pattern: only its variable's name gives it away.
PLAIN_SECRET = "correct-horse-battery-staple"


def _python(home: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    full.update(TOLARIA_HOME=str(home), PYTHONPATH=str(ROOT), OPENAI_API_KEY=KEY,
                MY_SERVICE_PASSWORD=PLAIN_SECRET, KEYMAP="us", **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=full, cwd=home,
                          capture_output=True, text=True, timeout=60, check=False)


def _reports(home: Path) -> list[Path]:
    return sorted((home / "data" / "crash-reports").glob("crash-*.txt"))


def _assert_clean(*texts: str) -> None:
    for text in texts:
        assert KEY not in text and "test-secret" not in text
        assert PLAIN_SECRET not in text


PRELUDE = """\
    import logging, os, threading
    from tolaria.support import crash
    crash.install("cli")
    log = logging.getLogger("tolaria.test")
    log.warning("calling the endpoint with %s", os.environ["OPENAI_API_KEY"])
    log.warning("password is %s; keymap us", os.environ["MY_SERVICE_PASSWORD"])
"""


def test_unhandled_exception_writes_a_redacted_report(tolaria_home: Path) -> None:
    done = _python(tolaria_home, PRELUDE + """\
    def deep(key):
        raise RuntimeError(f"endpoint refused key={key} and {os.environ['MY_SERVICE_PASSWORD']}")
    deep(os.environ["OPENAI_API_KEY"])
    """)
    assert done.returncode == 1
    [report] = _reports(tolaria_home)
    text = report.read_text()
    assert "Traceback (most recent call last):" in text and "in deep" in text
    assert "RuntimeError: endpoint refused key=***" in text
    assert "process: cli (pid " in text and "fatal: yes" in text
    assert "version: tolaria " in text and "platform: " in text
    assert "calling the endpoint with ***" in text  # the recent log lines, redacted
    assert "password is ***; keymap us" in text  # a short value ("us") is left alone
    _assert_clean(text, done.stderr, done.stdout)
    # Python's own printout still happens, redacted, and says where the report is.
    assert "RuntimeError: endpoint refused key=***" in done.stderr
    assert f"a crash report was saved at {report}" in done.stderr
    assert "OPENAI_API_KEY" not in text  # never the environment
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    assert stat.S_IMODE(report.parent.stat().st_mode) == 0o700


def test_thread_exception_writes_a_report_and_the_process_goes_on(tolaria_home: Path) -> None:
    done = _python(tolaria_home, PRELUDE + """\
    def work():
        raise ValueError("thread saw " + os.environ["OPENAI_API_KEY"])
    t = threading.Thread(target=work, name="worker")
    t.start(); t.join()
    print("still here")
    """)
    assert done.returncode == 0 and done.stdout == "still here\n"
    [report] = _reports(tolaria_home)
    text = report.read_text()
    assert "where: thread worker" in text and "fatal: no" in text
    assert "ValueError: thread saw ***" in text
    _assert_clean(text, done.stderr)


def test_asyncio_handler_writes_a_report(tolaria_home: Path) -> None:
    done = _python(tolaria_home, PRELUDE + """\
    import asyncio
    def callback():
        raise KeyError("callback had " + os.environ["OPENAI_API_KEY"])
    async def main():
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(crash.asyncio_handler)
        loop.call_soon(callback)
        await asyncio.sleep(0.1)
        print("loop went on")
    asyncio.run(main())
    """)
    assert done.returncode == 0 and done.stdout == "loop went on\n", done.stderr
    [report] = _reports(tolaria_home)
    text = report.read_text()
    assert "where: event loop: Exception in callback" in text and "fatal: no" in text
    assert "KeyError: 'callback had ***'" in text
    _assert_clean(text, done.stderr)  # the loop's own log line (stderr) is redacted too


def test_one_process_writes_at_most_a_few_reports(tolaria_home: Path) -> None:
    done = _python(tolaria_home, PRELUDE + """\
    def work():
        raise ValueError("again")
    for i in range(crash.MAX_PER_PROCESS + 3):
        t = threading.Thread(target=work); t.start(); t.join()
    """)
    assert done.returncode == 0
    assert len(_reports(tolaria_home)) == crash.MAX_PER_PROCESS


def test_the_folder_keeps_only_the_newest_reports(tolaria_home: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crash, "MAX_PER_PROCESS", 100)
    folder = crash.folder()
    folder.mkdir(parents=True)
    for i in range(crash.MAX_REPORTS + 5):
        (folder / f"crash-2020010{i // 10}T0000{i % 10:02d}000000-cli-1.txt").write_text("old")
    path = crash.write_report(RuntimeError("new"), where="test", fatal=False, kind="cli")
    assert path is not None
    left = crash.reports()
    assert len(left) == crash.MAX_REPORTS and left[-1] == path
    assert "crash-20200100T000000" not in " ".join(p.name for p in left)  # the oldest went


def test_the_window_announces_new_gui_reports_once(tolaria_home: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crash, "MAX_PER_PROCESS", 100)
    assert crash.unseen_notice() == []
    crash.write_report(RuntimeError("cli"), where="test", fatal=True, kind="cli")
    assert crash.unseen_notice() == []  # `tolaria run` told its user itself
    slot = crash.write_report(RuntimeError("slot"), where="test", fatal=False, kind="gui")
    assert crash.unseen_notice() == [
        f"Tolaria ran into an unexpected error last time; a report was saved at {slot}"]
    assert crash.unseen_notice() == []
    crash.write_report(RuntimeError("one"), where="test", fatal=False, kind="gui")
    last = crash.write_report(RuntimeError("two"), where="test", fatal=True, kind="gui")
    assert crash.unseen_notice() == [
        f"Tolaria quit unexpectedly last time (2 reports); a report was saved at {last}"]


def test_the_cli_installs_the_hooks(tolaria_home: Path) -> None:
    """``tolaria`` subcommands run with the hooks installed (the bug is simulated)."""
    done = _python(tolaria_home, """\
    import os, sys
    from tolaria.cli import main as cli
    def broken(as_json):
        raise RuntimeError("bug near " + os.environ["OPENAI_API_KEY"])
    cli._cmd_chats = broken
    sys.exit(cli.main(["chats"]))
    """)
    assert done.returncode == 1
    [report] = _reports(tolaria_home)
    assert "RuntimeError: bug near ***" in report.read_text()
    _assert_clean(report.read_text(), done.stderr)


@pytest.mark.parametrize(("text", "expected"), [
    ("Authorization: Bearer abcdef123456", "Authorization: Bearer ***"),
    ("GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwx", "GITHUB_TOKEN=***"),
    ("key AIzaSyA-1234567890abcdefghijklmnopqrstu here", "key *** here"),
    ("plain words, a path /usr/bin and us", "plain words, a path /usr/bin and us"),
])
def test_redact_patterns(text: str, expected: str) -> None:
    assert crash.redact(text, environ={"KEYMAP": "us"}) == expected


def test_redact_any_value_of_a_secret_looking_variable() -> None:
    env = {"DB_PASSWORD": "hunter22", "SOME_TOKEN": "  tok-with-spaces  ", "HOME": "/root",
           "X_SECRET": "1"}
    assert crash.redact("pw hunter22 tok-with-spaces /root 1", env) == "pw *** *** /root 1"


def test_redact_leaves_exception_names_alone() -> None:
    assert crash.redact("KeyError: 'name'", {}) == "KeyError: 'name'"
    assert crash.redact("api_key: abc password=x", {}) == "api_key: *** password=***"


def test_ctrl_c_is_no_crash(tolaria_home: Path) -> None:
    done = _python(tolaria_home, PRELUDE + "    raise KeyboardInterrupt\n")
    assert done.returncode == -signal.SIGINT and "KeyboardInterrupt" in done.stderr
    assert _reports(tolaria_home) == []
