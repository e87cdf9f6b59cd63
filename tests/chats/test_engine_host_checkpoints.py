"""The engine snapshots a chat's folder on its host (issue 25.6, ADR 0035): before and after a
turn run there, through the same TurnCheckpoints as locally. The host is a command target
(``env``: the supervisor and Tolaria's git runner run right here, through the bootstrap), so
no sshd is needed (over ssh: tests/remote/test_remote_checkpoints.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import async_test, cli_env, git, git_repo, wait_until

from tolaria.chats.checkpoints import MARKER_TURN_BEFORE, MARKER_TURN_CHANGES
from tolaria.chats.engine import QuietObserver, TurnEngine
from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import Store
from tolaria.support.tasks import TaskSet

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@async_test
async def test_a_turn_on_a_host_gets_its_checkpoints_there(
        tolaria_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "3")
    there = tmp_path / "host-data"  # the host's ~/.local/share (the store there)
    monkeypatch.setenv("XDG_DATA_HOME", str(there))
    (tolaria_home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\n')
    repo = git_repo(tmp_path / "proj", {"a.txt": "one\n"})
    store = Store()  # this home's: ``tolaria changes`` reads it too
    engine = TurnEngine(store, ProcessRegistry(), QuietObserver(), TaskSet(),
                        adapters=load_adapters(), grace_s=1.0)
    try:
        chat = engine.new_conversation("demo", str(repo))
        assert engine.set_host(chat.id, "box", str(repo)) is None
        stream_id = engine.send(chat.id, "run a long tool")
        assert stream_id is not None
        await wait_until(lambda: bool(store.markers(chat.id, MARKER_TURN_BEFORE)), within=30,
                         what="the before-snapshot there")
        (repo / "a.txt").write_text("one\nchanged during the turn\n")  # the "agent's" edit
        await wait_until(lambda: bool(store.markers(chat.id, MARKER_TURN_CHANGES)), within=60,
                         what="the after-snapshot there")
        (marker,) = store.markers(chat.id, MARKER_TURN_CHANGES)
        assert marker.data["files"] == [["a.txt", "modified"]]
        assert marker.data["repo"] == str(repo)
        # The store is the host's (its data folder), not this Tolaria's; the repository's own
        # refs and index are untouched.
        assert list((there / "tolaria" / "checkpoints" / "stores").glob("*.git"))
        assert not (tolaria_home / "data" / "checkpoints" / "stores").exists() or not any(
            (tolaria_home / "data" / "checkpoints" / "stores").iterdir())
        assert "refs/tolaria" not in git(repo, "for-each-ref")
        assert git(repo, "status", "--porcelain").split() == ["M", "a.txt"]
        store.flush()
        # ``tolaria changes --diff`` reads the diff there too (the same seam).
        shown = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "tolaria", "changes", str(chat.id), "--diff",
                             "--json"], env=cli_env(tolaria_home), capture_output=True,
            text=True, timeout=60, check=False)
        assert shown.returncode == 0, shown.stderr
        (entry,) = json.loads(shown.stdout)
        (item,) = entry["files"]
        assert "+changed during the turn" in item["diff"], item
    finally:
        await engine.shutdown()
        store.close()
