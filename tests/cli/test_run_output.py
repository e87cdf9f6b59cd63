"""What ``tolaria run`` writes: the TTY mode (#16.3) on a real pty, and hostile output (#14).

#14.3: a reader that closes its end (``| head -1``) stops the run quietly: tree killed, exit 141,
no traceback, no crash report. #14.10: escape sequences an agent writes never reach the terminal
(except plain SGR colour); ``--json`` escapes C1 controls. #14.11: lone surrogates print as U+FFFD
in text, as escapes in JSON, and no event is lost. Every case runs a real fake agent
(tests/fakes/hostile_output_agent.py) and checks the bytes written.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from cli.test_cli import ROOT, Background, json_lines, tolaria
from helpers import cli_env, is_gone, marker_pids

from tolaria.core.stream_id import new_stream_id

HOSTILE_AGENT = ROOT / "tests" / "fakes" / "hostile_output_agent.py"
from fakes import hostile_output_agent as hostile  # noqa: E402

EXIT_BROKEN_PIPE = 141
#: Terminal commands that must never be printed raw (SGR colour is allowed).
FORBIDDEN = (b"\x1b]", b"\x1b[2J", b"\x1b[H", b"\x1bP", "\x9b".encode(), "\x9d".encode(),
             "\x9c".encode(), "\x85".encode())


def add_agent(home: Path, mode: str) -> str:
    """A user manifest running the hostile agent in ``mode``; returns its id."""
    agent = f"hostile-{mode.replace('_', '-')}"
    folder = home / "adapters"
    folder.mkdir(exist_ok=True)
    (folder / f"{agent}.toml").write_text(
        f'id = "{agent}"\nname = "Hostile {mode}"\nprotocol = "claude-stream-json"\n'
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(HOSTILE_AGENT))}, "
        f'"{mode}", "{{prompt}}"]\n')
    return agent


def run_in_pty(args: list[str], env: dict[str, str], cwd: Path, *, interrupt_on: bytes = b"",
               timeout: float = 60) -> tuple[int, bytes]:
    """``tolaria ARGS`` with stdout and stderr on a real pty; its exit code and every byte it
    wrote. With ``interrupt_on``, SIGINT is sent once those bytes have appeared."""
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tolaria", *args], env={**env, "TERM": "xterm"},
                            cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the pty
                break
            if not chunk:
                break
            out += chunk
            if interrupt_on and interrupt_on in out:
                proc.send_signal(signal.SIGINT)
                interrupt_on = b""
        return proc.wait(10), bytes(out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)


def crash_reports(home: Path) -> list[Path]:
    return list((home / "data" / "crash-reports").glob("crash-*"))


# --- TTY mode ---------------------------------------------------------------------------------


def test_tty_mode_shows_spinner_tool_line_status_and_stop_reason(tolaria_home: Path,
                                                                 work: Path) -> None:
    env = cli_env(tolaria_home, TOLARIA_DEMO_TOOL_SECONDS="0.5")
    env.pop("NO_COLOR", None)
    code, out = run_in_pty(["run", "--agent", "demo", "hello"], env, work)
    text = out.decode()
    assert code == 0, text
    assert any(frame in text for frame in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")  # the spinner, with the elapsed time
    assert "s\x1b[0m" in text
    assert "$ echo started; sleep 0.5; echo finished" in text
    assert "\x1b[32m  ✓ ok" in text  # coloured
    assert "## Done" in text
    assert "■ done in" in text
    assert '"command"' not in text  # no raw tool JSON


def test_piped_output_stays_plain(tolaria_home: Path, work: Path) -> None:
    result = tolaria("run", "--agent", "demo", "hello", env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 0
    assert "\x1b" not in result.stdout + result.stderr
    assert "## Done" in result.stdout
    assert "[done: end_turn," in result.stderr


def test_ctrl_c_on_a_tty_says_cancelled(tolaria_home: Path, work: Path) -> None:
    sid = new_stream_id()
    env = cli_env(tolaria_home, TOLARIA_DEMO_TOOL_SECONDS="30")
    code, out = run_in_pty(["run", "--stream-id", sid, "--grace", "0.5", "--agent", "demo",
                            "hello"], env, work, interrupt_on=b"$ echo started")
    text = out.decode()
    assert code == 130, text
    assert "cancelled" in text
    assert "failed" not in text
    assert "■ cancelled after" in text
    assert marker_pids(sid) == []


def test_ctrl_c_piped_says_tool_cancelled(tolaria_home: Path, work: Path) -> None:
    sid = new_stream_id()
    runner = Background(["run", "--stream-id", sid, "--grace", "0.5", "--agent", "demo",
                         "hello"], cli_env(tolaria_home, TOLARIA_DEMO_TOOL_SECONDS="30"), work)
    try:
        runner.wait_until(lambda: any(p.name() == "sleep" for p in _procs(sid)), "the tool")
        runner.proc.send_signal(signal.SIGINT)
        assert runner.finish() == 130
    finally:
        runner.kill()
    err = "".join(runner.stderr)
    assert "[tool cancelled]" in err
    assert "[tool failed]" not in err
    assert "[done: cancelled," in err


# --- #14.10 escape sequences -----------------------------------------------------------------


def test_escape_sequences_never_reach_the_terminal(tolaria_home: Path, work: Path) -> None:
    agent = add_agent(tolaria_home, "escapes")
    code, out = run_in_pty(["run", "--agent", agent, "hi"], cli_env(tolaria_home), work)
    assert code == 0, out
    for seq in FORBIDDEN:
        assert seq not in out, seq
    text = out.decode()
    assert "safe " in text and " text" in text and "after " in text
    assert "\x1b[31mred\x1b[0m" in text  # plain SGR colour is kept
    assert "$ echo hi" in text  # the tool's command, its sequences removed


def test_escape_sequences_on_stderr_never_reach_the_terminal(tolaria_home: Path,
                                                             work: Path) -> None:
    agent = add_agent(tolaria_home, "stderr_escapes")
    code, out = run_in_pty(["run", "--agent", agent, "hi"], cli_env(tolaria_home), work)
    assert code == 1
    for seq in FORBIDDEN:
        assert seq not in out, seq
    assert b"badly" in out


def test_json_escapes_c1_controls_and_keeps_the_text(tolaria_home: Path, work: Path) -> None:
    agent = add_agent(tolaria_home, "escapes")
    result = subprocess.run([sys.executable, "-m", "tolaria", "run", "--json", "--agent", agent,
                             "hi"], env=cli_env(tolaria_home), cwd=work, capture_output=True,
                            timeout=60, check=False)
    assert result.returncode == 0
    raw = result.stdout.decode()
    assert not any(0x80 <= ord(c) <= 0x9f or c == "\x1b" for c in raw)
    texts = [e["text"] for e in json_lines(raw) if e["kind"] == "text_delta"]
    assert hostile.HOSTILE in texts  # decoded, the exact text the agent sent


# --- #14.11 lone surrogates ------------------------------------------------------------------


def test_lone_surrogates_in_json_lose_no_event(tolaria_home: Path, work: Path) -> None:
    agent = add_agent(tolaria_home, "surrogates")
    result = tolaria("run", "--json", "--agent", agent, "hi", env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    events = json_lines(result.stdout)
    kinds = [e["kind"] for e in events]
    assert kinds.count("text_delta") == 2
    assert "tool_start" in kinds and "tool_done" in kinds
    assert kinds[-1] == "done"
    texts = [e["text"] for e in events if e["kind"] == "text_delta"]
    assert texts[0] == "half \ud800 a pair \udc00 end"  # escapes decode to the same string
    (tool,) = [e for e in events if e["kind"] == "tool_start"]
    assert tool["input"] == {"command": "echo \ud83d"}
    assert crash_reports(tolaria_home) == []


@pytest.mark.parametrize("on_tty", [False, True], ids=["piped", "tty"])
def test_lone_surrogates_in_text_print_as_replacement(tolaria_home: Path, work: Path,
                                                      on_tty: bool) -> None:
    agent = add_agent(tolaria_home, "surrogates")
    args = ["run", "--agent", agent, "hi"]
    if on_tty:
        code, out = run_in_pty(args, cli_env(tolaria_home), work)
    else:
        done = subprocess.run([sys.executable, "-m", "tolaria", *args], env=cli_env(tolaria_home),
                              cwd=work, capture_output=True, timeout=60, check=False)
        code, out = done.returncode, done.stdout + done.stderr
    text = out.decode("utf-8")  # strict: valid UTF-8
    assert code == 0, text
    assert "half \ufffd a pair \ufffd end" in text
    assert "after the tool" in text
    assert "Traceback" not in text
    assert crash_reports(tolaria_home) == []


# --- #14.3 a closed stdout -------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "as_json", "stderr_too"), [
    ("slow", False, False), ("slow", True, False), ("slow", False, True), ("quiet", False, False)],
    ids=["text", "json", "2>&1", "no-more-output"])
def test_closed_stdout_stops_the_run_quietly(tolaria_home: Path, work: Path, mode: str,
                                             as_json: bool, stderr_too: bool) -> None:
    agent = add_agent(tolaria_home, mode)
    sid = new_stream_id()
    args = ["run", "--stream-id", sid, "--grace", "0.5", "--agent", agent, "hi"]
    err_file = work.parent / "stderr.txt"
    with open(err_file, "wb") as fh:  # `2>&1 | head -1`: stderr is the same pipe
        proc = subprocess.Popen([sys.executable, "-m", "tolaria", *args,
                                 *(["--json"] * as_json)], env=cli_env(tolaria_home), cwd=work,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if stderr_too else fh)
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline()  # like `| head -1`: one line, then the pipe is closed
        assert first
        deadline = time.monotonic() + 20
        while not any(p.name() == "sleep" for p in _procs(sid)):
            assert time.monotonic() < deadline, "the agent's tool never started"
            time.sleep(0.05)
        tree = _procs(sid)
        proc.stdout.close()
        code = proc.wait(20)
        err = err_file.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert code == EXIT_BROKEN_PIPE, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception" not in err
    assert "crash report" not in err
    assert crash_reports(tolaria_home) == []
    assert [p.pid for p in tree if not is_gone(p)] == []
    assert marker_pids(sid) == []


def test_a_closed_stderr_alone_does_not_stop_the_run(tolaria_home: Path, work: Path) -> None:
    out_file = work.parent / "stdout.txt"
    with open(out_file, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--agent", "demo",
                                 "hello"], env=cli_env(tolaria_home), cwd=work,
                                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    proc.stderr.close()  # nobody reads the tool lines and the status
    assert proc.wait(60) == 0
    assert "## Done" in out_file.read_text()  # the whole answer
    assert crash_reports(tolaria_home) == []


def test_a_closed_terminal_stops_the_run(tolaria_home: Path, work: Path) -> None:
    """The terminal window is closed mid-run: writes fail with EIO; the run stops, tree and all."""
    sid = new_stream_id()
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--stream-id", sid,
                             "--grace", "0.5", "--agent", "demo", "hello"],
                            env={**cli_env(tolaria_home, TOLARIA_DEMO_TOOL_SECONDS="60"),
                                 "TERM": "xterm"}, cwd=work, stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave)
    os.close(slave)
    try:
        out = bytearray()
        deadline = time.monotonic() + 30
        while b"$ echo started" not in out:
            assert time.monotonic() < deadline, out
            if select.select([master], [], [], 0.5)[0]:
                out += os.read(master, 65536)
        tree = _procs(sid)
        os.close(master)  # the window goes away
        master = -1
        code = proc.wait(20)
    finally:
        if master >= 0:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert code == EXIT_BROKEN_PIPE
    assert [p.pid for p in tree if not is_gone(p)] == []
    assert marker_pids(sid) == []
    assert crash_reports(tolaria_home) == []


def _procs(stream_id: str) -> list[psutil.Process]:
    found = []
    for pid in marker_pids(stream_id):
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(pid))
    return found
