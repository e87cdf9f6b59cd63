"""The stop zoo's MCP case (ADR 0019): an MCP server that leaves the tree (setsid + double fork)
and ignores SIGTERM, started by an agent that cleans its servers' environment as the real CLIs
do (tests/fakes/fake_mcp_client.py), through the configuration Tolaria generated.

The server carries the run's marker only because Tolaria wrote it into the server's own ``env``:
a Stop ends it with both process backends (the portable one has no subreaper, so the marker is
all it has), an app crash (SIGKILL of ``tolaria run``) leaves none either (the watchdog), and
the private configuration file goes with the run (after a crash: with the watchdog).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import (
    ROOT,
    Collector,
    async_test,
    cli_env,
    is_gone,
    reap_after_watchdog,
    wait_until,
    watchdogs_of,
)

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.adapters.mcp_spec import McpSpec
from tolaria.core.events import Diagnostic, Error
from tolaria.core.mcp.servers import NOTE, McpServer
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.mcp_setup import run_folder
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

CLIENT = ROOT / "tests" / "fakes" / "fake_mcp_client.py"
PROBE = ROOT / "tests" / "fakes" / "mcp_probe_server.py"
GRACE = 0.5


def client_manifest() -> Manifest:
    return Manifest(id="fake-mcp", name="Fake MCP client", protocol="claude-stream-json",
                    command=(sys.executable, str(CLIENT), "{prompt}"),
                    mcp=McpSpec(form="claude-json", transports=("stdio",)))


def daemon_server(pidfile: Path) -> McpServer:
    return McpServer("daemon", command=sys.executable, args=(str(PROBE), "--daemon"),
                     env=(("TOLARIA_TEST_MCP_DAEMON", str(pidfile)),))


async def read_daemon(pidfile: Path) -> tuple[psutil.Process, dict[str, str]]:
    await wait_until(pidfile.exists, 20, "the daemonized MCP server")
    data = json.loads(pidfile.read_text())
    return psutil.Process(data["pid"]), data["environ"]


@pytest.mark.usefixtures("process_backend")
@async_test
async def test_stop_ends_a_daemonized_mcp_server_that_ignores_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.json"
    registry, sid, events = ProcessRegistry(), new_stream_id(), Collector()
    request = RunRequest(client_manifest(), "go", str(tmp_path), {},
                         mcp_servers=(daemon_server(pidfile),))
    task = asyncio.ensure_future(stream_ai_agent(request, sid, events, registry=registry,
                                                 grace_s=GRACE))
    daemon, environ = await read_daemon(pidfile)
    try:
        # Cleaned by the agent: nothing of Tolaria's environment but what the config carried.
        assert environ.get("TOLARIA_STREAM_ID") == sid
        assert "TOLARIA_OWNER" in environ
        assert set(environ) <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LC_CTYPE",
                                "TOLARIA_STREAM_ID", "TOLARIA_OWNER", "TOLARIA_MCP_SERVER",
                                "TOLARIA_TEST_MCP_DAEMON"}
        assert Path(run_folder(sid)).is_dir()
        assert registry.abort(sid)
        done = await asyncio.wait_for(task, 15)
        assert done.stop_reason == "cancelled"
        assert done.survivors == (), done.survivors
        assert is_gone(daemon), "the daemonized MCP server survived the stop"
        assert not Path(run_folder(sid)).exists(), "the private MCP config outlived the run"
    finally:
        if not is_gone(daemon):
            daemon.kill()


@async_test
async def test_a_finished_run_ends_its_daemonized_server(tmp_path: Path) -> None:
    """The agent ends its turn with the server still running: the run's end takes it along."""
    pidfile = tmp_path / "daemon.json"
    sid = new_stream_id()
    request = RunRequest(client_manifest(), "go", str(tmp_path), {"FAKE_MCP_FINISH": "1"},
                         mcp_servers=(daemon_server(pidfile),))
    done = await asyncio.wait_for(stream_ai_agent(request, sid, Collector(),
                                                  registry=ProcessRegistry(), grace_s=GRACE), 30)
    assert done.stop_reason == "end_turn"
    daemon = psutil.Process(json.loads(pidfile.read_text())["pid"]) if pidfile.exists() else None
    assert daemon is None or is_gone(daemon), "the MCP server outlived the run"


@async_test
async def test_missing_variable_refuses_or_continues_as_set(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.delenv("TOLARIA_TEST_NO_SUCH_TOKEN", raising=False)
    broken = McpServer("needs-token", command=sys.executable, args=(str(PROBE),),
                       env=(("TOKEN", "${TOLARIA_TEST_NO_SUCH_TOKEN}"),))
    env = {"FAKE_MCP_FINISH": "1"}
    # "refuse": the turn ends with the reason, the agent is never started.
    events = Collector()
    request = RunRequest(client_manifest(), "go", str(tmp_path), env, mcp_servers=(broken,),
                         mcp_on_failure="refuse")
    done = await stream_ai_agent(request, new_stream_id(), events, registry=ProcessRegistry())
    assert done.stop_reason == "error"
    (error,) = [e for e in events.events if isinstance(e, Error)]
    assert "needs-token" in error.message and "TOLARIA_TEST_NO_SUCH_TOKEN" in error.message
    assert "refused" in error.message
    assert not events.of("init"), "the agent was started anyway"
    # "continue": said in the chat, the run goes on with the other servers.
    good = McpServer("good", command=sys.executable, args=(str(PROBE),))
    events = Collector()
    request = RunRequest(client_manifest(), "go", str(tmp_path), env,
                         mcp_servers=(broken, good))
    done = await stream_ai_agent(request, new_stream_id(), events, registry=ProcessRegistry())
    assert done.stop_reason == "end_turn"
    notes = [e.message for e in events.events if isinstance(e, Diagnostic) and e.source == NOTE]
    assert len(notes) == 1 and "needs-token" in notes[0] and "goes on" in notes[0], notes
    assert "servers: good" in events.text()


def _settings(home: Path, pidfile: Path) -> None:
    (home / "adapters").mkdir(exist_ok=True)
    (home / "adapters" / "fake-mcp.toml").write_text(
        'id = "fake-mcp"\nname = "Fake MCP client"\nprotocol = "claude-stream-json"\n'
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(CLIENT))}, \"{{prompt}}\"]\n"
        '[mcp]\nform = "claude-json"\ntransports = ["stdio"]\n')
    (home / "settings.toml").write_text(
        "[mcp.servers.daemon]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(PROBE))}, \"--daemon\"]\n"
        f"env = {{ TOLARIA_TEST_MCP_DAEMON = {json.dumps(str(pidfile))} }}\n")


def test_app_crash_leaves_no_mcp_server(tolaria_home: Path, tmp_path: Path) -> None:
    """``tolaria run`` with a server of settings.toml, SIGKILLed while the server runs: the
    watchdog ends the daemonized server (found by the marker the generated config gave it)."""
    pidfile = tmp_path / "daemon.json"
    _settings(tolaria_home, pidfile)
    sid = new_stream_id()
    app = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--json", "--stream-id", sid,
                            "--agent", "fake-mcp", "go"], env=cli_env(tolaria_home),
                           cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    daemon = None
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists():
            assert time.monotonic() < deadline and app.poll() is None, (
                app.stderr.read() if app.poll() is not None and app.stderr else "no server")
            time.sleep(0.02)
        time.sleep(0.05)  # written atomically; read once complete
        daemon = psutil.Process(json.loads(pidfile.read_text())["pid"])
        environ = daemon.environ()
        assert environ.get("TOLARIA_STREAM_ID") == sid
        files = tolaria_home / "data" / "run" / f"{app.pid}-{sid}.files"
        assert (files / "claude-mcp.json").exists(), "the generated config is not where expected"
        dogs = watchdogs_of(app.pid)
        assert len(dogs) == 1
        app.send_signal(signal.SIGKILL)
        app.wait(10)
        killed = time.monotonic()
        while not is_gone(daemon):
            assert time.monotonic() - killed < 3, "the MCP server outlived the killed app"
            time.sleep(0.02)
        reap_after_watchdog(dogs)
        # The private configuration (it may hold a server's token) went with the tracking file.
        assert not files.exists(), "the watchdog left the run's MCP configuration behind"
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(10)
        if app.stderr is not None:
            app.stderr.close()
        if daemon is not None and not is_gone(daemon):
            with contextlib.suppress(psutil.Error):
                daemon.kill()


def test_tolaria_run_says_which_server_it_left_out(tolaria_home: Path, tmp_path: Path) -> None:
    """The settings' servers reach ``tolaria run`` (prepare_run); one whose command is missing
    is named on stderr and the run goes on; with on_failure = "refuse" it does not start."""
    _settings(tolaria_home, tmp_path / "unused.json")
    settings = tolaria_home / "settings.toml"
    settings.write_text('[mcp.servers.ghost]\ncommand = "tolaria-no-such-mcp-server"\n')
    env = cli_env(tolaria_home, FAKE_MCP_FINISH="1")
    argv = [sys.executable, "-m", "tolaria", "run", "--agent", "fake-mcp", "go"]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "MCP server 'ghost' is not passed to Fake MCP client" in done.stderr
    assert "not found" in done.stderr and "servers: " in done.stdout
    settings.write_text('[mcp]\non_failure = "refuse"\n' + settings.read_text())
    refused = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode != 0
    assert "'ghost'" in refused.stderr and "refused" in refused.stderr
    assert "servers: " not in refused.stdout, "the agent ran although the run was refused"


def test_tolaria_abort_from_another_process_ends_the_mcp_server(tolaria_home: Path,
                                                                tmp_path: Path) -> None:
    """``tolaria abort`` from a second process: the run's daemonized, SIGTERM-ignoring server
    goes with it, and ``tolaria run`` reports no survivor."""
    pidfile = tmp_path / "daemon.json"
    _settings(tolaria_home, pidfile)
    sid = new_stream_id()
    env = cli_env(tolaria_home)
    app = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--stream-id", sid,
                            "--agent", "fake-mcp", "go"], env=env, cwd=tmp_path,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    daemon = None
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists():
            assert time.monotonic() < deadline and app.poll() is None, "no server"
            time.sleep(0.02)
        time.sleep(0.05)
        daemon = psutil.Process(json.loads(pidfile.read_text())["pid"])
        abort = subprocess.run([sys.executable, "-m", "tolaria", "abort", sid], env=env,
                               capture_output=True, text=True, timeout=30)
        assert abort.returncode == 0, abort.stderr
        _, err = app.communicate(timeout=30)
        assert is_gone(daemon), "the MCP server outlived tolaria abort"
        assert "left alive" not in err and "survivor" not in err.lower(), err
    finally:
        if app.poll() is None:
            app.kill()
            app.communicate(timeout=10)
        if daemon is not None and not is_gone(daemon):
            with contextlib.suppress(psutil.Error):
                daemon.kill()
