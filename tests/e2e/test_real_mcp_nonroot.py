"""Gemini CLI gets Tolaria's MCP servers when Tolaria runs as a normal user (ADR 0019).

Gemini CLI 0.61 skips a system (defaults) settings file not owned by root, so a form that only
works as root passes no server to any real user; the rest of the suite runs as root. Here the
whole turn (Tolaria and the real CLI, against the loopback fake model) runs as the non-root
test user (tests/nonroot.py): the probe's tool must be called, the user's own
~/.gemini/settings.json must still apply and stay byte for byte as it was, and the private home
must be gone after the run.
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
#: The user's own setting the run must still honour: Gemini offers the model no such tool.
EXCLUDED_TOOL = "google_web_search"


@pytest.fixture
def user_folder() -> Iterator[Path]:
    """A folder of the test user's (its HOME, Tolaria's data, the work folder) that root's
    0700 /root cannot hide from them; with a copy of the pinned Gemini CLI they can run."""
    if os.getuid() != 0:
        pytest.skip("run as root: the test hands the turn to the non-root test user")
    cli = installed_cli("gemini")
    base = Path(os.environ.get("TOLARIA_NONROOT_BASE", "/var/tmp"))
    folder = Path(subprocess.run(["mktemp", "-d", str(base / "tolaria-gemini-XXXXXX")],
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


def _run_as_user(folder: Path, model: FakeModelServer) -> tuple[list[dict[str, Any]], bytes]:
    user = folder / "user"
    home, data, work = user / "home", user / "tolaria", user / "work"
    cli = installed_cli("gemini")
    env = run_env(cli, home, model.url)  # the user's own ~/.gemini/settings.json
    settings = home / ".gemini" / "settings.json"
    own = json.loads(settings.read_text())
    own["tools"] = {"exclude": [EXCLUDED_TOOL]}
    settings.write_text(json.dumps(own, indent=3) + "\n")
    before = settings.read_bytes()
    env["PATH"] = env["PATH"].replace(str(bin_dir(cli)), str(folder / "cli" / "node_modules"
                                                             / ".bin"))
    work.mkdir()
    data.mkdir()
    _chown_tree(user)
    python = other_user_python()
    pythonpath = python_env(user)["PYTHONPATH"]
    spec = {"agent": "gemini", "prompt": "E2E-MCP-MARK: call the probe", "cwd": str(work),
            "env": {**env, **QUIET_ENV},
            "server": {"name": "probe", "command": python, "args": [str(PROBE)],
                       "env": {"TOLARIA_TEST_MCP_MARKER": str(user / "marker.jsonl"),
                               "PYTHONPATH": pythonpath}}}
    done = as_other_user([python, str(DRIVER), json.dumps(spec)], timeout=280,
                         env=python_env(data), cwd=work)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return lines, before


def test_gemini_as_a_normal_user_calls_the_servers_tool(user_folder: Path,
                                                        model_server: FakeModelServer) -> None:
    since = len(model_server.seen)
    settings = user_folder / "user" / "home" / ".gemini" / "settings.json"
    lines, before = _run_as_user(user_folder, model_server)
    explain = "\n".join(json.dumps(line)[:300] for line in lines[-25:])
    assert lines[-1] == {"done": "end_turn"}, explain
    marker = user_folder / "user" / "marker.jsonl"
    assert marker.exists(), f"Gemini run by {USER!r} never called the probe's tool\n{explain}"
    found = json.loads(marker.read_text().splitlines()[0])
    assert found["stream_id"] == lines[0]["stream_id"]
    assert any(line.get("type") == "ToolStart" and line.get("server") == "probe"
               and line.get("name") == f"probe · {MCP_TOOL}" for line in lines), explain
    assert not any("Security Warning" in str(line.get("message")) for line in lines), explain
    # The user's own settings still applied (their excluded tool is not offered) ...
    offered = {tool.get("name") for seen in model_server.seen[since:]
               for group in seen.body.get("tools", [])
               for tool in group.get("functionDeclarations", [])}
    assert any(name and MCP_TOOL in name for name in offered), offered
    assert EXCLUDED_TOOL not in offered, offered
    assert "read_file" in offered, offered  # (the tool list is Gemini's usual one)
    # ... and left as they were, byte for byte; the private home is gone.
    assert settings.read_bytes() == before
    assert not Path(lines[0]["folder"]).exists(), "the private home outlived the run"
    assert not marker_pids(lines[0]["stream_id"])
    # Gemini's own session record went into the user's real ~/.gemini, not the private home.
    assert any((user_folder / "user" / "home" / ".gemini" / "tmp").rglob("*.json*"))
