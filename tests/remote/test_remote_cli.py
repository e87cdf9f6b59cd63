"""``tolaria run --host`` through a real sshd, stopped by ``tolaria abort`` from another terminal.

Everything local runs as the non-root ``tolaria-test`` user; the agent (the built-in demo agent,
with per-host overrides: its program and PYTHONPATH there) runs as ``tolaria-remote``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from nonroot import other_user_prefix, other_user_python, python_env, tolaria_as_other_user
from remote.sshd import ALIAS, SshServer, kill_remote, remote_account, remote_processes

from tolaria.core.stream_id import new_stream_id

ROOT = Path(__file__).resolve().parents[2]


def _settings(home: Path, extra: str = "") -> None:
    (home / "settings.toml").write_text(
        f'[hosts."{ALIAS}"]\nprograms = {{ demo = "/usr/bin/python3" }}\n'
        f'env = {{ PYTHONPATH = "{ROOT}" }}\n' + extra)


def _run(sshd: SshServer, home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*other_user_prefix(), other_user_python(), "-m", "tolaria", "run", "--host", ALIAS,
         "--ssh-config", str(sshd.config), *args],
        env=python_env(home), cwd=home,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def test_run_on_a_host_and_abort_it_from_another_terminal(sshd: SshServer, shared: Path) -> None:
    home = shared / "home"
    _settings(home)
    sid = new_stream_id()
    run = _run(sshd, home, "--agent", "demo", "--no-save", "--stream-id", sid, "--json",
               "run a long tool")
    try:
        deadline = time.monotonic() + 30
        listed: list[dict[str, object]] = []
        while time.monotonic() < deadline and not remote_processes(sid):
            time.sleep(0.05)
        assert remote_processes(sid), "the agent never started on the host"
        streams = tolaria_as_other_user(home, "streams", "--json")
        listed = [s for s in json.loads(streams.stdout) if s["stream_id"] == sid]
        assert listed and listed[0]["host"] == ALIAS, streams.stdout
        table = tolaria_as_other_user(home, "streams").stdout
        assert f"demo on {ALIAS}" in table
        time.sleep(0.5)  # some output first: it must be kept
        aborted = tolaria_as_other_user(home, "abort", sid)
        assert aborted.stdout.strip() == "true", aborted.stderr
        out, err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        kill_remote(sid)
    assert run.returncode == 130, err
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    done = events[-1]
    assert done["kind"] == "done" and done["stop_reason"] == "cancelled", done
    assert done["survivors"] == []
    assert any(e["kind"] in ("text_delta", "thinking_delta", "tool_start") for e in events), out
    assert remote_processes(sid) == []


def test_a_saved_chat_keeps_the_folder_on_the_host(sshd: SshServer, shared: Path) -> None:
    """Saved like any run (history, resume), with the folder as it is on the host and no local
    checkpoint of a folder of that name here."""
    home = shared / "home"
    _settings(home)
    folder = shared / "remote-only"  # exists for the remote account only
    folder.mkdir()
    os.chown(folder, *remote_account()[2:4])
    folder.chmod(0o700)
    run = _run(sshd, home, "--agent", "demo", "--cwd", str(folder), "hello")
    try:
        _out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err
    assert "saved in chat 1" in err
    chats = json.loads(tolaria_as_other_user(home, "chats", "--json").stdout)
    assert chats[0]["cwd"] == str(folder)
    assert not (home / "data" / "checkpoints").exists() or not any(
        (home / "data" / "checkpoints").iterdir())


def test_mcp_servers_on_a_host_are_said_by_tolaria_run(sshd: SshServer, shared: Path) -> None:
    """A server the agent on the host does not get is said on stderr and in ``--json``;
    ``on_failure = "refuse"`` refuses the run on the host with one line (ADR 0019)."""
    home = shared / "home"
    servers = ('[mcp.servers.notes]\ncommand = "python3"\n'
               '[mcp.servers.gh]\ntransport = "http"\nurl = "https://example.invalid/mcp"\n'
               'headers = { Authorization = "Bearer ${TOLARIA_TEST_UNSET_TOKEN}" }\n'
               'agents = ["claude"]\n')
    _settings(home, servers)
    run = _run(sshd, home, "--agent", "demo", "--no-save", "hello")
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    assert (f"[MCP server 'notes' is not passed to Demo agent (offline) on {ALIAS}: Demo agent "
            "(offline) cannot be given MCP servers by Tolaria") in err, err
    assert "'gh'" not in err  # meant for Claude only
    run = _run(sshd, home, "--agent", "demo", "--no-save", "--json", "hello")
    out, err = run.communicate(timeout=60)
    notes = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert any(e["kind"] == "diagnostic" and "'notes' is not passed to Demo agent (offline) on " in
               e["message"] for e in notes), out
    _settings(home, '[mcp]\non_failure = "refuse"\n' + servers)
    sid = new_stream_id()
    run = _run(sshd, home, "--agent", "claude", "--no-save", "--stream-id", sid, "hello")
    out, err = run.communicate(timeout=60)
    assert run.returncode != 0, (out, err)
    assert (f"MCP server 'gh' is not passed to Claude Code on {ALIAS}: "
            "${TOLARIA_TEST_UNSET_TOKEN} is not set") in err, err
    assert "The run is refused" in err, err
    assert remote_processes(sid) == []
