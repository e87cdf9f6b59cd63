"""Which agents a host has, with versions (issue 25 item 5, ADR 0034): one ssh connection to the
real sshd of this tier, fake agent programs in the remote account's home, found on PATH, through
the login shell, or where the host's ``programs`` setting says; a host that cannot be reached
says so in one line, quickly."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from remote.sshd import ALIAS, REMOTE_USER, SshServer

from tolaria.config.remote_hosts import load_target
from tolaria.core.adapters.manifest import Manifest, load_adapters
from tolaria.core.remote.discover import HostAgents, discover
from tolaria.core.remote.hosts import Target


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def remote_home(sshd: SshServer) -> Iterator[Path]:
    """A folder in the remote account's home: ``bin`` (on the PATH the host's env gives),
    ``login`` (on PATH only in the login shell ``login-sh``, named as SHELL by the host's env,
    whose "profile" adds it and prints a banner), ``set`` (named by the host's ``programs``).
    The account's own files stay as other tests left them."""
    home = Path(sshd.account.pw_dir) / f"tolaria-agents-{secrets.token_hex(4)}"
    _script(home / "bin" / "claude", 'echo "2.1.7 (Claude Code)"')
    _script(home / "bin" / "qwen", 'echo "qwen: first run: set up an account" >&2; exit 3')
    _script(home / "login" / "codex", 'echo "WARNING: no home"; echo "codex-cli 0.58.0"')
    _script(home / "set" / "my-gemini", 'echo "0.19.1"')
    _script(home / "login-sh", f'shift\necho "Welcome to the test host"\n'
                               f'PATH="{home / "login"}:$PATH" exec /bin/sh -c "$@"')
    shutil.chown(home, REMOTE_USER)
    for path in home.rglob("*"):
        shutil.chown(path, REMOTE_USER)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _manifests(*ids: str) -> list[Manifest]:
    manifests = load_adapters().manifests
    return [manifests[i] for i in ids]


def _settings(path: Path, sshd: SshServer, home: Path, host: str = ALIAS) -> Path:
    path.write_text(
        f'[remote]\nssh_config = "{sshd.config}"\n\n'
        f'[hosts."{host}"]\n'
        f'env = {{ PATH = "{home / "bin"}:/usr/bin:/bin", SHELL = "{home / "login-sh"}" }}\n'
        f'programs = {{ gemini = "{home / "set" / "my-gemini"}" }}\n')
    return path


def test_agents_found_on_the_host_with_versions(sshd: SshServer, remote_home: Path,
                                                tmp_path: Path) -> None:
    settings = _settings(tmp_path / "settings.toml", sshd, remote_home)
    target = load_target(ALIAS, settings)
    found = asyncio.run(discover(target, _manifests("claude", "codex", "gemini", "qwen",
                                                    "aider", "ollama")))
    assert found.error is None, found.error
    assert found.host == ALIAS
    by_id = {d.agent: d for d in found.detections}
    assert set(by_id) == {"claude", "codex", "gemini", "qwen", "aider"}  # ollama: this computer
    claude = by_id["claude"]
    assert (claude.path, claude.source) == (str(remote_home / "bin" / "claude"), "PATH")
    assert claude.version == "2.1.7 (Claude Code)" and claude.error is None
    codex = by_id["codex"]  # only the login shell's PATH has it; its banner is skipped
    assert (codex.path, codex.source) == (str(remote_home / "login" / "codex"), "login shell")
    assert codex.version == "codex-cli 0.58.0"
    gemini = by_id["gemini"]  # the host's programs override
    assert (gemini.path, gemini.source) == (str(remote_home / "set" / "my-gemini"), "settings")
    assert gemini.version == "0.19.1"
    qwen = by_id["qwen"]  # installed, but its version check fails: said in one line
    assert qwen.path == str(remote_home / "bin" / "qwen") and qwen.version is None
    assert qwen.error == "`qwen --version` exited with code 3: qwen: first run: set up an account"
    aider = by_id["aider"]
    assert aider.path is None
    assert aider.error == ("aider is not installed on this host (not found on PATH or through "
                           "the login shell)")
    assert found.info["system"] == "Linux" and found.info["python"].startswith("3.")


def test_overrides_change_what_is_found(sshd: SshServer, remote_home: Path,
                                        tmp_path: Path) -> None:
    """Without the host's env the account's own PATH has no claude; a programs entry that is no
    program there is said as such."""
    settings = tmp_path / "settings.toml"
    settings.write_text(f'[remote]\nssh_config = "{sshd.config}"\n\n[hosts."{ALIAS}"]\n'
                        f'programs = {{ claude = "{remote_home / "nothing-here"}" }}\n')
    found = asyncio.run(discover(load_target(ALIAS, settings), _manifests("claude", "codex")))
    assert found.error is None, found.error
    claude, codex = found.get("claude"), found.get("codex")
    assert claude is not None and codex is not None
    assert claude.path is None
    assert claude.error == f"{remote_home / 'nothing-here'} is not an executable file on this host"
    assert codex.path is None  # the account's own login shell knows nothing of login/


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_host_says_so_in_one_line_fast(sshd: SshServer, tmp_path: Path) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text(f'[remote]\nssh_config = "{sshd.config}"\n')
    host = f"ssh://{REMOTE_USER}@127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    found = asyncio.run(discover(load_target(host, settings), _manifests("claude")))
    assert time.monotonic() - started < 10
    assert found.detections == ()
    assert found.error == f"cannot connect to {REMOTE_USER}@127.0.0.1:{host.rpartition(':')[2]}: " \
                          "connection refused"


def test_a_host_that_never_answers_is_given_up_in_time(tmp_path: Path) -> None:
    """A hanging transport (here a command target that sleeps): the whole look is bounded, and
    nothing of it is left behind (the autouse fixture checks)."""
    hang = tmp_path / "hang"
    _script(hang, "exec sleep 300")
    target = Target(prefix=(str(hang),), name="stuck")
    started = time.monotonic()
    found = asyncio.run(discover(target, _manifests("claude"), timeout=1.5))
    assert time.monotonic() - started < 5
    assert found == HostAgents("stuck", error="no answer from stuck within 1.5 s (the host or "
                                              "the network may be down)",
                               checked_at=found.checked_at)


def test_no_python_on_the_host(tmp_path: Path) -> None:
    target = Target(prefix=("env",), name="bare", python="python9.99-nowhere")
    found = asyncio.run(discover(target, _manifests("claude")))
    assert found.error == "no Python on bare to look for agents (set the host's python in settings)"


def test_preferences_test_on_the_host_runs_a_real_turn_there(sshd: SshServer, remote_home: Path,
                                                            tmp_path: Path) -> None:
    """The Test button's run on a host: the agent found there (its version probe over the same
    connection kind), then a tiny real turn through ssh and the supervisor; an agent the host
    lacks is said as such."""
    from tolaria.config.overrides import AgentOverrides
    from tolaria.config.probe import test_agent

    fake = Path(__file__).resolve().parents[1] / "fakes" / "fake_agent.py"
    _script(remote_home / "bin" / "talker",
            f'[ "$1" = --version ] && {{ echo "talker 1.2.3"; exit 0; }}\nexec python3 "{fake}" "$@"')
    shutil.chown(remote_home / "bin" / "talker", REMOTE_USER)
    talker = Manifest(id="talker", name="Talker", protocol="claude-stream-json",
                      command=("talker", "normal", "{prompt}"),
                      version_command=("talker", "--version"))
    settings = _settings(tmp_path / "settings.toml", sshd, remote_home)
    target = load_target(ALIAS, settings)
    result = asyncio.run(test_agent(talker, AgentOverrides(), "", 60, target=target))
    assert result.ok, result
    assert result.message == "Talker answered" and result.version == "talker 1.2.3"
    assert result.detail.startswith("Hello from fake"), result.detail

    missing = Manifest(id="ghost", name="Ghost", protocol="claude-stream-json",
                       command=("ghost-cli-nowhere", "{prompt}"))
    result = asyncio.run(test_agent(missing, AgentOverrides(), "", 60, target=target))
    assert not result.ok
    assert result.message == f"Ghost is not installed on {ALIAS}"
    assert "not found on PATH or through the login shell" in result.detail


def test_tolaria_agents_on_a_host(sshd: SshServer, remote_home: Path, tolaria_home: Path) -> None:
    """``tolaria agents --host``: the same look from the command line, the host's settings
    applied; an unreachable host is one line on stderr and exit code 1."""
    import json
    import subprocess
    import sys

    from helpers import cli_env

    _settings(tolaria_home / "settings.toml", sshd, remote_home)
    done = subprocess.run([sys.executable, "-m", "tolaria", "agents", "--host", ALIAS, "--json"],
                          env=cli_env(tolaria_home), capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    agents = {a["agent"]: a for a in data["agents"]}
    assert agents["claude"]["version"] == "2.1.7 (Claude Code)"
    assert agents["codex"]["source"] == "login shell"
    assert agents["gemini"]["source"] == "settings"
    text = subprocess.run([sys.executable, "-m", "tolaria", "agents", "--host", ALIAS],
                          env=cli_env(tolaria_home), capture_output=True, text=True, timeout=60,
                          check=False)
    assert text.returncode == 0 and text.stdout.startswith(f"on {ALIAS}: Linux"), text.stdout
    assert "2.1.7 (Claude Code)" in text.stdout

    gone = subprocess.run([sys.executable, "-m", "tolaria", "agents", "--host",
                           f"ssh://{REMOTE_USER}@127.0.0.1:{_closed_port()}",
                           "--ssh-config", str(sshd.config)],
                          env=cli_env(tolaria_home), capture_output=True, text=True, timeout=60,
                          check=False)
    assert gone.returncode == 1
    assert gone.stderr.startswith("tolaria: cannot connect to") and gone.stderr.count("\n") == 1
