"""MCP servers of Tolaria's settings reach an agent run on a host (ADR 0019, "On a host").

Through the real sshd of the remote tier: a real Claude Code (``--mcp-config``: a private file
the supervisor writes on the host) and Codex (``-c mcp_servers...``: argv and env) on the host
call the stdlib probe server's tool (tests/fakes/mcp_stdlib_probe.py, run by the host's
python3), its ``${VAR}`` expanded from the local environment; a server that cannot go is said
in the chat ("... is not passed to Claude Code on <host>: why"); ``on_failure = "refuse"``
refuses the run before anything starts there. Nothing is left on either side, the run's
private files on the host included.
"""

from __future__ import annotations

import json
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
from e2e.fake_model import FakeModelServer
from remote.remoteclis import remote_bin, remote_env
from remote.remotehelpers import run_local
from remote.sshd import SshServer, kill_remote, remote_processes

from tolaria.core.stream_id import new_stream_id

pytestmark = [pytest.mark.timeout(360)]

PROBE = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_stdlib_probe.py")
TURN_S = 180.0


def _probe(marker_var: str) -> dict[str, object]:
    return {"name": "probe", "command": "python3", "args": [PROBE],
            "env": [["TOLARIA_TEST_MCP_MARKER", "${" + marker_var + "}"]]}


def _left_files(cache: Path) -> list[str]:
    return [str(p) for p in cache.rglob("*.files")] if cache.exists() else []


@pytest.mark.e2e
@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_real_cli_on_the_host_calls_the_tool_of_a_passed_server(
        agent: str, sshd: SshServer, shared: Path, model_server: FakeModelServer) -> None:
    cli, bin_folder = remote_bin(agent)
    env = remote_env(cli, bin_folder, shared / f"{agent}-home", model_server.url)
    env["ENABLE_TOOL_SEARCH"] = "false"  # Claude: offer the MCP tool directly (test_real_mcp)
    marker = shared / "marker.jsonl"
    env["PROBE_MARKER"] = str(marker)  # ${PROBE_MARKER}: expanded here, from the local env
    work = shared / "work"
    work.mkdir()
    work.chmod(0o777)
    cache = shared / "cache"
    sid = new_stream_id()
    out = run_local(sshd, shared, sid, timeout=TURN_S + 60, agent=agent, permission_mode="full",
                    prompt="E2E-MCP-MARK: call the probe", env=env, cwd=str(work),
                    cache_dir=str(cache), heartbeat_s=10.0,
                    mcp=[_probe("PROBE_MARKER"),
                         {"name": "broken", "command": "python3", "args": [PROBE],
                          "env": [["TOKEN", "${TOLARIA_TEST_UNSET_TOKEN}"]]}])
    assert out["stop_reason"] == "end_turn", out
    lines = [json.loads(x) for x in marker.read_text().splitlines()] if marker.exists() else []
    assert lines, f"the probe's tool never ran on the host: {out}"
    assert lines[0]["stream_id"] == sid and lines[0]["server"] == "probe", lines
    assert "probe marked" in out["text"], out  # the tool's result reached the model
    name = "Claude Code" if agent == "claude" else "Codex"
    said = [n for n in out["notes"] if "'broken'" in n]
    assert said and said[0].startswith(f"MCP server 'broken' is not passed to {name} on "), out
    assert "${TOLARIA_TEST_UNSET_TOKEN} is not set" in said[0], said
    assert not any("'probe' is not passed" in n for n in out["notes"]), out["notes"]
    assert out["survivors"] == [] and out["remote_left"] == [], out
    assert _left_files(cache) == [], "the run's private files outlived it on the host"


def test_refuse_on_a_host_refuses_before_anything_starts_there(
        sshd: SshServer, shared: Path) -> None:
    sid = new_stream_id()
    cache = shared / "cache"
    out = run_local(sshd, shared, sid, agent="claude", cache_dir=str(cache),
                    mcp=[{"name": "gh", "transport": "http", "url": "https://example.invalid/mcp",
                          "headers": [["Authorization", "Bearer ${TOLARIA_TEST_UNSET_TOKEN}"]]}],
                    mcp_on_failure="refuse")
    assert out["stop_reason"] == "error", out
    assert len(out["errors"]) == 1, out
    error = out["errors"][0]
    assert error.startswith("MCP server 'gh' is not passed to Claude Code on "), error
    assert "${TOLARIA_TEST_UNSET_TOKEN} is not set" in error and "refused" in error, error
    assert out["remote_left"] == [], out
    assert not cache.exists(), "the supervisor was started for a refused run"


def test_a_server_the_agent_cannot_take_is_said_and_the_run_goes_on(
        sshd: SshServer, shared: Path) -> None:
    sid = new_stream_id()
    out = run_local(sshd, shared, sid, mode="normal",
                    mcp=[{"name": "notes", "command": "python3", "args": [PROBE]}],
                    mcp_on_failure="refuse")  # not broken: only said, never refused
    assert out["stop_reason"] == "end_turn", out
    said = [n for n in out["notes"] if "'notes'" in n]
    assert len(said) == 1, out["notes"]
    assert said[0].startswith("MCP server 'notes' is not passed to remote normal on "), said
    assert "cannot be given MCP servers by Tolaria" in said[0], said
    assert out["remote_left"] == [], out


@pytest.mark.e2e
def test_the_private_files_on_the_host_are_private_and_go_when_the_link_dies(
        sshd: SshServer, shared: Path, model_server: FakeModelServer) -> None:
    cli, bin_folder = remote_bin("claude")
    env = remote_env(cli, bin_folder, shared / "claude-home", model_server.url)
    env["ENABLE_TOOL_SEARCH"] = "false"
    marker = shared / "marker.jsonl"
    env["PROBE_MARKER"] = str(marker)
    cache = shared / "cache"
    sid = new_stream_id()
    seen: dict[str, object] = {}

    def look() -> None:  # while the tool sleeps on the host: the run's folder and its file
        deadline = time.monotonic() + TURN_S
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        for folder in cache.rglob("*.files"):
            seen["folder"] = stat.S_IMODE(folder.stat().st_mode)
            seen["files"] = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
            seen["config"] = json.loads((folder / "claude-mcp.json").read_text())

    looker = threading.Thread(target=look)
    looker.start()
    try:
        out = run_local(sshd, shared, sid, timeout=TURN_S + 60, agent="claude",
                        permission_mode="full", prompt="E2E-MCP-SLEEP: call the probe", env=env,
                        cwd=str(shared), cache_dir=str(cache), heartbeat_s=10.0,
                        mcp=[_probe("PROBE_MARKER")], action="disconnect",
                        wait_file=str(marker), wait_s=TURN_S, settle=0.5, keep_remote=True)
        looker.join(TURN_S)
        deadline = out["acted_at"] + 5.0  # the supervisor there ends it all by itself
        while (remote_processes(sid) or _left_files(cache)) and time.time() < deadline:
            time.sleep(0.05)
        left = remote_processes(sid)
    finally:
        kill_remote(sid)
    assert seen.get("folder") == 0o700, (seen, out)
    assert seen["files"] == {"claude-mcp.json": 0o600}, seen
    config = seen["config"]["mcpServers"]["probe"]  # type: ignore[index]
    assert config["env"]["TOLARIA_TEST_MCP_MARKER"] == str(marker), config  # expanded here
    assert config["env"]["TOLARIA_STREAM_ID"] == sid, config
    assert left == [], f"left on the host 5 s after the link died: {left}"
    assert _left_files(cache) == [], "the run's private files outlived the dead link"


def test_the_private_files_go_when_the_supervisor_is_killed_there(
        sshd: SshServer, shared: Path) -> None:
    """kill -9 of the supervisor on the host: its watcher ends the tree and removes the run's
    files (the fake agent takes a Claude-form file it ignores)."""
    sid, cache, pidfile = new_stream_id(), shared / "cache", shared / "pids"
    out: dict[str, object] = {}
    thread = threading.Thread(target=lambda: out.update(run_local(
        sshd, shared, sid, mode="daemon", action="wait", heartbeat_s=30.0, cache_dir=str(cache),
        env={"FAKE_PIDFILE": str(pidfile)}, mcp_form="claude-json",
        mcp=[_probe("FAKE_PIDFILE")])))
    thread.start()
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    folders = list(cache.rglob("*.files"))
    assert len(folders) == 1 and (folders[0] / "claude-mcp.json").exists(), folders
    marked = remote_processes(sid)
    [supervisor] = {_ppid(pid) for pid in marked} - set(marked)
    account = sshd.account
    subprocess.run(["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}",
                    "--clear-groups", "kill", "-9", str(supervisor)], check=True)
    killed = time.monotonic()
    while folders[0].exists() and time.monotonic() - killed < 5.0:
        time.sleep(0.02)
    thread.join(60)
    assert not thread.is_alive(), "the local run hung"
    assert not folders[0].exists(), "the run's files outlived the killed supervisor"
    assert out["remote_left"] == [], out


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])


@pytest.mark.e2e
@pytest.mark.parametrize("agent", ["qwen", "opencode"])
def test_the_settings_forms_reach_a_real_cli_on_the_host(
        agent: str, sshd: SshServer, shared: Path, model_server: FakeModelServer) -> None:
    """Qwen: a settings file the supervisor writes there (named by an env variable); opencode:
    its config content in the env. (Gemini CLI 0.61 takes a system defaults file only when it
    and every folder above it belong to root: not for a user's run, here or on a host.)"""
    cli, bin_folder = remote_bin(agent)
    if agent == "qwen":  # its tool search off, as in tests/e2e/test_real_mcp.py
        (shared / "qwen-home" / ".qwen").mkdir(parents=True)
        (shared / "qwen-home" / ".qwen" / "settings.json").write_text(
            json.dumps({"tools": {"toolSearch": {"enabled": False}}}))
    env = remote_env(cli, bin_folder, shared / f"{agent}-home", model_server.url)
    marker = shared / "marker.jsonl"
    env["PROBE_MARKER"] = str(marker)
    work = shared / "work"
    work.mkdir()
    work.chmod(0o777)
    sid = new_stream_id()
    cache = Path(sshd.account.pw_dir) / ".cache" / f"tolaria-mcp-test-{sid}"
    try:
        out = run_local(sshd, shared, sid, timeout=TURN_S + 60, agent=agent,
                        permission_mode="full", prompt="E2E-MCP-MARK: call the probe", env=env,
                        cwd=str(work), cache_dir=str(cache), heartbeat_s=10.0,
                        mcp=[_probe("PROBE_MARKER")])
        left_files = _left_files(cache)
    finally:
        subprocess.run(["rm", "-rf", str(cache)], check=False)
    lines = [json.loads(x) for x in marker.read_text().splitlines()] if marker.exists() else []
    assert lines, f"the probe's tool never ran on the host: {out}"
    assert lines[0]["stream_id"] == sid and lines[0]["server"] == "probe", lines
    assert out["stop_reason"] == "end_turn", out
    assert out["survivors"] == [] and out["remote_left"] == [], out
    assert left_files == [], "the run's private files outlived it on the host"


def test_an_acp_agent_on_the_host_gets_the_servers_in_session_new(
        sshd: SshServer, shared: Path) -> None:
    """stdio in ``mcpServers`` with the run's marker; an http server the agent's capabilities
    do not take is said, with the host."""
    log = shared / "acplog"
    log.mkdir()
    log.chmod(0o777)
    sid = new_stream_id()
    out = run_local(sshd, shared, sid, protocol="acp", mcp_form="acp", mode="acp",
                    command=["python3", str(Path(PROBE).parent / "fake_acp_agent.py"), "normal"],
                    env={"FAKE_LOG": str(log), "PROBE_MARKER": str(shared / "marker")},
                    mcp=[_probe("PROBE_MARKER"),
                         {"name": "web", "transport": "http", "url": "https://example.invalid/m"}])
    assert out["stop_reason"] == "end_turn", out
    records = [json.loads(x) for x in (log / "acp.jsonl").read_text().splitlines()]
    [given] = [r["mcpServers"] for r in records if r["method"] == "session/new"]
    assert [s["name"] for s in given] == ["probe"], given
    env = {e["name"]: e["value"] for e in given[0]["env"]}
    assert env["TOLARIA_TEST_MCP_MARKER"] == str(shared / "marker"), env  # expanded here
    assert env["TOLARIA_STREAM_ID"] == sid, env
    said = [n for n in out["notes"] if "'web'" in n]
    assert said and said[0].startswith("MCP server 'web' is not passed to remote acp on "), said
    assert out["remote_left"] == [], out
