"""The real ``tolaria`` command, driven as a subprocess: run, agents, streams, abort, signals.

Every test gets its own TOLARIA_HOME (conftest), which also isolates the control sockets. The
demo agent's tool (``sh -c 'echo started; sleep N; echo finished'``) runs in a new session, so a
stop that only signals the agent would leave the ``sleep`` behind: these tests check by pid and by
the run's TOLARIA_STREAM_ID marker that it is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers import cli_env, is_gone, marker_pids

from tolaria.core.stream_id import is_valid_stream_id, new_stream_id
from tolaria.support import paths

ROOT = Path(__file__).resolve().parents[2]
EXIT_CANCELLED = 130


def tolaria(*args: str, env: dict[str, str], cwd: Path,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tolaria", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class Background:
    """``tolaria run`` in the background, its stdout and stderr collected line by line."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tolaria", *args], env=env, cwd=cwd,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout),
                                          daemon=True),
                         threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr),
                                          daemon=True)]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _pump(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def events(self) -> list[dict[str, Any]]:
        return json_lines("".join(self.stdout))

    def wait_until(self, predicate: Callable[[], object], what: str, within: float = 20) -> None:
        deadline = time.monotonic() + within
        while not predicate():
            if self.proc.poll() is not None:
                raise AssertionError(f"tolaria run exited ({self.proc.returncode}) before {what}:"
                                     f"\n{''.join(self.stdout)[-2000:]}\n{''.join(self.stderr)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {''.join(self.stderr)}")
            time.sleep(0.02)

    def finish(self, within: float = 20) -> int:
        code = self.proc.wait(within)
        for thread in self._threads:
            thread.join(5)
        return code

    def kill(self) -> None:
        """Last-resort cleanup after a failed assertion."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@contextlib.contextmanager
def demo_in_background(home: Path, cwd: Path, *extra: str,
                       stream_id: str | None = None) -> Any:
    """``tolaria run --json --agent demo`` with a 30 s tool; yields once the tool's sleep runs."""
    stream_id = stream_id or new_stream_id()
    runner = Background(["run", "--json", "--grace", "0.5", "--stream-id", stream_id,
                         *extra, "--agent", "demo", "hello"],
                        cli_env(home, TOLARIA_DEMO_TOOL_SECONDS="30"), cwd)
    try:
        runner.wait_until(lambda: _sleeping_tool(stream_id), "the demo's sleep tool")
        yield runner, stream_id, [psutil.Process(pid) for pid in marker_pids(stream_id)]
    finally:
        runner.kill()


def _sleeping_tool(stream_id: str) -> bool:
    for pid in marker_pids(stream_id):
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).name() == "sleep":
                return True
    return False


def assert_tree_gone(stream_id: str, procs: list[psutil.Process]) -> None:
    assert [p.pid for p in procs if not is_gone(p)] == []
    assert marker_pids(stream_id) == []


# --- tolaria run -----------------------------------------------------------------------------


def test_run_demo_prints_the_markdown_answer(tolaria_home: Path, work: Path) -> None:
    result = tolaria("run", "--agent", "demo", "hello", env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 0, result.stderr
    assert "## Done" in result.stdout
    assert "```python" in result.stdout
    assert 'You asked "hello".' in result.stdout
    assert "[done: end_turn" in result.stderr
    assert "[tool Bash" in result.stderr


def test_run_json_prints_one_event_per_line(tolaria_home: Path, work: Path) -> None:
    sid = new_stream_id()
    result = tolaria("run", "--json", "--stream-id", sid, "--agent", "demo", "hello",
                     env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 0, result.stderr
    events = json_lines(result.stdout)  # raises if any line is not JSON
    assert all(e["stream_id"] == sid for e in events)
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "init"
    assert {"thinking_delta", "text_delta", "tool_start", "tool_done", "usage"} <= set(kinds)
    assert kinds.count("done") == 1
    assert kinds[-1] == "done"
    assert events[-1]["stop_reason"] == "end_turn"
    assert events[-1]["exit_code"] == 0
    assert events[-1]["survivors"] == []


def test_run_json_without_stream_id_makes_a_valid_one(tolaria_home: Path, work: Path) -> None:
    result = tolaria("run", "--json", "--agent", "demo", "hi", env=cli_env(tolaria_home),
                     cwd=work)
    assert result.returncode == 0, result.stderr
    ids = {e["stream_id"] for e in json_lines(result.stdout)}
    assert len(ids) == 1
    assert is_valid_stream_id(ids.pop())


def test_run_unknown_agent_lists_the_known_ones(tolaria_home: Path, work: Path) -> None:
    result = tolaria("run", "--agent", "nope", "hello", env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 2
    assert "nope" in result.stderr
    assert "demo" in result.stderr
    assert "claude" in result.stderr


@pytest.mark.parametrize("bad", ["not-an-id", "ai-agent-stream-", "ai-agent-stream-a b",
                                 "ai-agent-stream-" + "x" * 65])
def test_run_invalid_stream_id_is_bad_input(tolaria_home: Path, work: Path, bad: str) -> None:
    result = tolaria("run", "--stream-id", bad, "--agent", "demo", "hello",
                     env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 2
    assert "invalid --stream-id" in result.stderr
    assert result.stdout.strip() == ""


def test_run_in_a_missing_folder_is_an_error(tolaria_home: Path, work: Path) -> None:
    missing = work / "missing"
    result = tolaria("run", "--cwd", str(missing), "--agent", "demo", "hello",
                     env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 1
    assert str(missing) in result.stderr
    assert "[done: error" in result.stderr


BAD_MANIFEST = 'id = "bad"\nname = "Bad"\nprotocol = "nope"\ncommand = ["x"]\n'


def _write_bad_manifest(home: Path) -> Path:
    folder = home / "adapters"
    folder.mkdir(exist_ok=True)
    path = folder / "bad.toml"
    path.write_text(BAD_MANIFEST)
    return path


def test_broken_user_manifest_does_not_stop_demo(tolaria_home: Path, work: Path) -> None:
    _write_bad_manifest(tolaria_home)
    result = tolaria("run", "--agent", "demo", "hello", env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 0, result.stderr
    assert "## Done" in result.stdout


def test_run_reports_a_broken_user_manifest(tolaria_home: Path, work: Path) -> None:
    path = _write_bad_manifest(tolaria_home)
    result = tolaria("run", "--agent", "demo", "hello", env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 0, result.stderr
    assert str(path) in result.stderr
    assert "protocol" in result.stderr


def test_run_of_the_broken_agent_names_file_key_and_reason(tolaria_home: Path,
                                                           work: Path) -> None:
    path = _write_bad_manifest(tolaria_home)
    result = tolaria("run", "--agent", "bad", "hello", env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 2
    assert str(path) in result.stderr
    assert "protocol" in result.stderr
    assert "must be one of" in result.stderr


def test_agents_reports_a_broken_manifest_and_still_lists_demo(tolaria_home: Path,
                                                               work: Path) -> None:
    path = _write_bad_manifest(tolaria_home)
    result = tolaria("agents", "--json", env=cli_env(tolaria_home), cwd=work)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert "demo" in {a["agent"] for a in data["agents"]}
    assert len(data["errors"]) == 1
    error = data["errors"][0]
    assert error["file"] == str(path)
    assert error["key"] == "protocol"
    assert "must be one of" in error["reason"]
    text = tolaria("agents", env=cli_env(tolaria_home), cwd=work)
    assert str(path) in text.stdout
    assert "protocol" in text.stdout


# --- stopping ``tolaria run`` ----------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_run_cancels_and_ends_the_tool(tolaria_home: Path, work: Path,
                                                 sig: signal.Signals) -> None:
    with demo_in_background(tolaria_home, work) as (runner, sid, procs):
        assert any(p.name() == "sleep" for p in procs)
        os.kill(runner.proc.pid, sig)
        assert runner.finish() == EXIT_CANCELLED
        events = runner.events()
        assert [e["kind"] for e in events].count("done") == 1
        assert events[-1]["kind"] == "done"
        assert events[-1]["stop_reason"] == "cancelled"
        assert events[-1]["survivors"] == []
        assert_tree_gone(sid, procs)


def _streams(home: Path, cwd: Path) -> list[dict[str, Any]]:
    result = tolaria("streams", "--json", env=cli_env(home), cwd=cwd)
    assert result.returncode == 0, result.stderr
    streams: list[dict[str, Any]] = json.loads(result.stdout)
    return streams


def test_abort_from_another_process(tolaria_home: Path, work: Path) -> None:
    with demo_in_background(tolaria_home, work) as (runner, sid, procs):
        deadline = time.monotonic() + 20
        while not (listed := [s for s in _streams(tolaria_home, work) if s["stream_id"] == sid]):
            assert time.monotonic() < deadline, "tolaria streams never listed the run"
        (mine,) = listed
        assert mine["agent"] == "demo"
        assert mine["owner_pid"] == runner.proc.pid

        result = tolaria("abort", sid, env=cli_env(tolaria_home), cwd=work)
        assert_tree_gone(sid, procs)  # at once: the abort answers only once the tree is gone
        assert result.stdout.strip() == "true"
        assert result.returncode == 0

        again = tolaria("abort", sid, env=cli_env(tolaria_home), cwd=work)
        assert again.stdout.strip() == "false"
        assert again.returncode == 1

        assert runner.finish() == EXIT_CANCELLED
        assert runner.events()[-1]["stop_reason"] == "cancelled"
    assert not any(s["stream_id"] == sid for s in _streams(tolaria_home, work))


def test_abort_of_nothing_and_of_an_invalid_id(tolaria_home: Path, work: Path) -> None:
    nothing = tolaria("abort", new_stream_id(), env=cli_env(tolaria_home), cwd=work)
    assert nothing.stdout.strip() == "false"
    assert nothing.returncode == 1
    invalid = tolaria("abort", "not-an-id", env=cli_env(tolaria_home), cwd=work)
    assert invalid.returncode == 2
    assert "not-an-id" in invalid.stderr


def test_streams_lists_nothing_when_idle(tolaria_home: Path, work: Path) -> None:
    assert _streams(tolaria_home, work) == []
    text = tolaria("streams", env=cli_env(tolaria_home), cwd=work)
    assert text.stdout.strip() == "no live runs"


# --- tolaria agents / no subcommand ----------------------------------------------------------


def test_agents_json_with_claude_absent(tolaria_home: Path, work: Path, tmp_path: Path) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    # Discovery also asks the login shell and looks in ~/.local/bin, nvm...: a bare user.
    bare = cli_env(tolaria_home, PATH=str(empty_bin), HOME=str(tmp_path),
                   SHELL=str(tmp_path / "no-shell"))
    result = tolaria("agents", "--json", env=bare, cwd=work)
    assert result.returncode == 0, result.stderr
    agents = {a["agent"]: a for a in json.loads(result.stdout)["agents"]}
    demo, claude = agents["demo"], agents["claude"]
    assert demo["error"] is None
    assert demo["path"]
    assert demo["version"]
    assert "0.1.0" in demo["version"]
    assert claude["path"] is None
    assert claude["version"] is None
    assert "not found" in claude["error"]


def test_no_subcommand_opens_the_window_and_sigterm_closes_it(tolaria_home: Path,
                                                              work: Path) -> None:
    """``tolaria`` alone opens the window (offscreen here): it listens on its control socket,
    answers ``tolaria streams``, and SIGTERM closes it cleanly (exit 0, socket removed).

    The contract of the bare command lives in this one test; update it when that changes.
    """
    app = Background([], cli_env(tolaria_home, QT_QPA_PLATFORM="offscreen"), work)
    try:
        sock_path = paths.socket_dir(create=False) / f"{app.proc.pid}.sock"
        app.wait_until(sock_path.exists, "the window's control socket", within=60)
        assert _streams(tolaria_home, work) == []
        app.proc.send_signal(signal.SIGTERM)
        assert app.finish(within=30) == 0, "".join(app.stderr)
        assert not sock_path.exists()
    finally:
        app.kill()


# --- the control socket ----------------------------------------------------------------------


def _ask(path: Path, payload: bytes) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(payload)
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    answer: dict[str, Any] = json.loads(reply)
    return answer


def test_control_socket_is_private_and_refuses_junk(tolaria_home: Path, work: Path) -> None:
    with demo_in_background(tolaria_home, work) as (runner, sid, procs):
        folder = paths.socket_dir(create=False)
        sock_path = folder / f"{runner.proc.pid}.sock"
        runner.wait_until(sock_path.exists, "the control socket")
        sock_stat = sock_path.stat()
        assert stat.S_ISSOCK(sock_stat.st_mode)
        assert stat.S_IMODE(sock_stat.st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert folder.stat().st_uid == os.getuid()

        agent_pid = next(p.pid for p in procs if "tolaria.demo_agent" in p.cmdline())
        refused = [
            b"this is not json\n",
            b"\xff\xfe garbage\n",
            b"[1, 2, 3]\n",
            b"\n",
            b"x" * 5000 + b"\n",
            json.dumps({"op": "abort", "stream_id": agent_pid}).encode() + b"\n",
            json.dumps({"op": "abort", "stream_id": str(agent_pid)}).encode() + b"\n",
            json.dumps({"op": "abort", "pid": agent_pid}).encode() + b"\n",
            json.dumps({"op": "kill", "stream_id": sid}).encode() + b"\n",
        ]
        for payload in refused:
            answer = _ask(sock_path, payload)
            assert answer["ok"] is False, payload
            assert answer["error"], payload

        # Nothing of the run was touched by any of that.
        assert all(not is_gone(p) for p in procs)
        listed = _ask(sock_path, b'{"op": "list"}\n')
        assert listed["ok"] is True
        assert [s["stream_id"] for s in listed["streams"]] == [sid]

        stopped = _ask(sock_path, json.dumps({"op": "abort", "stream_id": sid}).encode() + b"\n")
        assert stopped == {"ok": True, "stopped": True}
        assert_tree_gone(sid, procs)
        assert runner.finish() == EXIT_CANCELLED
    assert not sock_path.exists()
