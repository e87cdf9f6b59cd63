"""Gemini CLI and Qwen Code get Tolaria's MCP servers when Tolaria runs as a normal user
(ADR 0019).

Gemini CLI 0.61 skips a system (defaults) settings file not owned by root, so a form that only
works as root passes no server to any real user; the rest of the suite runs as root. Here the
whole turn (Tolaria and the real CLI, against the loopback fake model) runs as the non-root
test user (tests/nonroot.py): the probe's tool must be called, the user's own
~/.gemini/settings.json must still apply and stay byte for byte as it was, and the private home
must be gone after the run. Qwen Code (a system defaults file, which it takes from anyone) is
checked the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.clis import QUIET_ENV, bin_dir, cache_root, run_env
from e2e.e2ehelpers import installed_cli
from e2e.fake_model import MCP_TOOL, FakeModelServer
from helpers import marker_pids
from nonroot import USER, as_other_user, other_uid_gid, other_user_python, python_env

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HERE = Path(__file__).resolve().parent
PROBE = HERE.parent / "fakes" / "mcp_probe_server.py"
DRIVER = HERE / "mcp_nonroot_driver.py"
#: The user's own setting the run must still honour: the CLI offers the model no such tool.
EXCLUDED_TOOL = {"gemini": "google_web_search", "qwen": "web_fetch"}
#: The user's own settings file, under HOME.
SETTINGS = {"gemini": ".gemini/settings.json", "qwen": ".qwen/settings.json"}


@pytest.fixture(params=["gemini", "qwen"])
def agent(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def user_folder(agent: str) -> Iterator[Path]:
    """A folder of the test user's (its HOME, Tolaria's data, the work folder) that root's
    0700 home cannot hide from them; with a copy of the pinned CLI they can run."""
    if os.getuid() != 0:
        pytest.skip("run as root: the test hands the turn to the non-root test user")
    cli = installed_cli(agent)
    base = Path(os.environ.get("TOLARIA_NONROOT_BASE", "/var/tmp"))
    folder = Path(subprocess.run(["mktemp", "-d", str(base / f"tolaria-{agent}-XXXXXX")],
                                 capture_output=True, text=True, check=True).stdout.strip())
    try:
        os.chmod(folder, 0o755)
        # Hard links when on one file system (fast): the files stay root's and read-only.
        installed = cache_root() / "npm" / cli.folder_name
        copied = folder / "cli"
        done = subprocess.run(["cp", "-al", str(installed), str(copied)], capture_output=True)
        if done.returncode != 0:
            shutil.copytree(installed, copied, symlinks=True)
        os.chmod(copied, 0o755)  # npm's staging folder was 0700 (a new inode: ours to change)
        user = folder / "user"
        user.mkdir(mode=0o700)
        os.chown(user, *other_uid_gid())
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _chown_tree(top: Path) -> None:
    uid, gid = other_uid_gid()
    for path, dirs, files in os.walk(top):
        for name in [path, *(os.path.join(path, n) for n in dirs + files)]:
            os.lchown(name, uid, gid)


def _run_as_user(agent: str, folder: Path,
                 model: FakeModelServer) -> tuple[list[dict[str, Any]], bytes]:
    user = folder / "user"
    home, data, work = user / "home", user / "tolaria", user / "work"
    cli = installed_cli(agent)
    env = run_env(cli, home, model.url)  # Gemini: the user's own ~/.gemini/settings.json
    settings = home / SETTINGS[agent]
    settings.parent.mkdir(exist_ok=True)
    own = json.loads(settings.read_text()) if settings.exists() else {}
    # Qwen defers MCP tools behind its tool search, which the scripted model does not use.
    own["tools"] = {"exclude": [EXCLUDED_TOOL[agent]], **(
        {"toolSearch": {"enabled": False}} if agent == "qwen" else {})}
    settings.write_text(json.dumps(own, indent=3) + "\n")
    before = settings.read_bytes()
    env["PATH"] = env["PATH"].replace(str(bin_dir(cli)), str(folder / "cli" / "node_modules"
                                                             / ".bin"))
    work.mkdir()
    data.mkdir()
    _chown_tree(user)
    python = other_user_python()
    pythonpath = python_env(user)["PYTHONPATH"]
    spec = {"agent": agent, "prompt": "E2E-MCP-MARK: call the probe", "cwd": str(work),
            "env": {**env, **QUIET_ENV},
            "server": {"name": "probe", "command": python, "args": [str(PROBE)],
                       "env": {"TOLARIA_TEST_MCP_MARKER": str(user / "marker.jsonl"),
                               "PYTHONPATH": pythonpath}}}
    done = as_other_user([python, str(DRIVER), json.dumps(spec)], timeout=280,
                         env=python_env(data), cwd=work)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return lines, before


def _offered(bodies: list[dict[str, Any]]) -> set[str]:
    """The tool names offered the model (Gemini: functionDeclarations; Qwen: OpenAI tools)."""
    names: set[str] = set()
    for body in bodies:
        for tool in body.get("tools", []):
            names.update(str(t.get("name")) for t in tool.get("functionDeclarations", []))
            if isinstance(tool.get("function"), dict):
                names.add(str(tool["function"].get("name")))
    return names


def test_a_normal_users_cli_calls_the_servers_tool(agent: str, user_folder: Path,
                                                   model_server: FakeModelServer) -> None:
    """Gemini CLI through its private home, Qwen Code through its system defaults file."""
    since = len(model_server.seen)
    settings = user_folder / "user" / "home" / SETTINGS[agent]
    lines, before = _run_as_user(agent, user_folder, model_server)
    explain = "\n".join(json.dumps(line)[:300] for line in lines[-25:])
    assert lines[-1] == {"done": "end_turn"}, explain
    marker = user_folder / "user" / "marker.jsonl"
    assert marker.exists(), f"{agent} run by {USER!r} never called the probe's tool\n{explain}"
    found = json.loads(marker.read_text().splitlines()[0])
    assert found["stream_id"] == lines[0]["stream_id"]
    assert any(line.get("type") == "ToolStart" and line.get("server") == "probe"
               and line.get("name") == f"probe · {MCP_TOOL}" for line in lines), explain
    assert not any("Security Warning" in str(line.get("message")) for line in lines), explain
    # The user's own settings still applied (their excluded tool is not offered) ...
    offered = _offered([seen.body for seen in model_server.seen[since:]])
    assert any(MCP_TOOL in name for name in offered), offered
    assert EXCLUDED_TOOL[agent] not in offered, offered
    assert "read_file" in offered, offered  # (the tool list is the CLI's usual one)
    # ... and left as they were, byte for byte; the private home is gone.
    if agent == "gemini":
        assert settings.read_bytes() == before
    else:  # Qwen Code itself stamps its settings version into the file on load
        after = json.loads(settings.read_text())
        assert {k: v for k, v in after.items() if k != "$version"} == json.loads(before)
    assert not Path(lines[0]["folder"]).exists(), "the private home outlived the run"
    assert not marker_pids(lines[0]["stream_id"])
    # Gemini's own session record went into the user's real ~/.gemini, not the private home.
    if agent == "gemini":
        assert any((user_folder / "user" / "home" / ".gemini" / "tmp").rglob("*.json*"))
