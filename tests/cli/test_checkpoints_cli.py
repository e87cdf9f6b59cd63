"""``tolaria checkpoints`` and ``tolaria chats --delete`` (issue 21 item 7): the storage meter of
``tolaria run`` chats' checkpoints, deleting a chat with its checkpoints, pruning those of deleted
chats, and old turns' only with --yes and a note under each; nothing in the work tree is touched,
also files the user changed meanwhile."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from helpers import git, git_repo

from tolaria.chats.checkpoint_storage import PRUNED_NOTE
from tolaria.chats.checkpoints import TurnCheckpoints
from tolaria.core import checkpoints as ck
from tolaria.core.store.db import Store

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def tolaria(home: Path, *args: str, edits: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    fake = json.dumps(str(ROOT / "tests" / "fakes" / "fake_agent.py"))
    (home / "adapters").mkdir(parents=True, exist_ok=True)
    (home / "adapters" / "editor.toml").write_text(
        f'id = "editor"\nprotocol = "claude-stream-json"\n'
        f'command = [{json.dumps(sys.executable)}, {fake}, "edit_files", "{{prompt}}"]\n')
    env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    env.update(TOLARIA_HOME=str(home), FAKE_EDITS=json.dumps(edits or {}),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "tolaria", *args], env=env, cwd=cwd or home,
                          capture_output=True, text=True, timeout=60, check=False,
                          stdin=subprocess.DEVNULL)


def refs_in_store(repo: Path) -> list[str]:
    return git(repo, f"--git-dir={ck.store_of(repo)}", "for-each-ref",
               "--format=%(refname)").split()


def age_store_objects(repo: Path) -> None:
    """As if the snapshots were taken an hour ago (prune keeps objects younger than 10 min)."""
    old = time.time() - 3600
    for folder, _dirs, files in os.walk(ck.store_of(repo) / "objects"):
        for name in files:
            os.utime(os.path.join(folder, name), (old, old))


def test_meter_delete_and_prune_of_tolaria_run_chats(tmp_path: Path, tolaria_home: Path) -> None:
    repo = git_repo(tmp_path / "proj", {"a.txt": "a\n"})
    for n in (1, 2, 3):
        done = tolaria(tolaria_home, "run", "--agent", "editor", "--cwd", str(repo), f"edit {n}",
                       edits={f"f{n}.txt": f"{n}\n"}, cwd=repo)
        assert done.returncode == 0, done.stderr
    assert len(refs_in_store(repo)) == 6
    assert git(repo, "for-each-ref", "refs/tolaria") == "", "nothing in the user's repository"
    meter = tolaria(tolaria_home, "checkpoints", "--json")
    assert meter.returncode == 0, meter.stderr
    (row,) = json.loads(meter.stdout)
    assert row["repo"] == str(repo) and row["checkpoints"] == 6 and row["size_bytes"] > 0
    assert str(repo) in tolaria(tolaria_home, "checkpoints").stdout

    with closing(Store(tolaria_home / "data" / "tolaria.sqlite3")) as store:
        first, second, third = sorted(c.id for c in store.list_conversations())
    refused = tolaria(tolaria_home, "chats", "--delete", str(first))
    assert refused.returncode == 1 and "kept" in refused.stderr
    deleted = tolaria(tolaria_home, "chats", "--delete", str(first), "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert "2 checkpoint refs" in deleted.stdout
    assert len(refs_in_store(repo)) == 4
    assert tolaria(tolaria_home, "chats", "--delete", "999", "--yes").returncode == 2

    # A chat deleted without its checkpoints (by an older Tolaria): they show as orphaned.
    with closing(Store(tolaria_home / "data" / "tolaria.sqlite3")) as store:
        store.delete_conversation(second)
    (row,) = json.loads(tolaria(tolaria_home, "checkpoints", "--json").stdout)
    assert row["of_deleted_chats"] == 2
    (repo / "f3.txt").write_text("the user's edit after the turn\n")
    age_store_objects(repo)
    size = row["size_bytes"]
    pruned = tolaria(tolaria_home, "checkpoints", "--prune")
    assert pruned.returncode == 0, pruned.stderr
    assert "Removes 2 checkpoints of deleted chats" in pruned.stdout
    assert len(refs_in_store(repo)) == 2
    (row,) = json.loads(tolaria(tolaria_home, "checkpoints", "--json").stdout)
    assert row["size_bytes"] < size

    # The last chat's turn is still shown: pruning it needs --yes and leaves a note.
    asked = tolaria(tolaria_home, "checkpoints", "--prune", "--older-than", "0")
    assert asked.returncode == 1 and "Revert and Rewind (a note under each says so)" in asked.stderr
    assert len(refs_in_store(repo)) == 2
    done = tolaria(tolaria_home, "checkpoints", "--prune", "--older-than", "0", "--yes")
    assert done.returncode == 0, done.stderr
    assert refs_in_store(repo) == []
    with closing(Store(tolaria_home / "data" / "tolaria.sqlite3")) as store:
        (changes,) = TurnCheckpoints(store).changes(third)
        assert changes.notice == PRUNED_NOTE
        assert changes.files, "the turn keeps its file list"
    assert (repo / "f3.txt").read_text() == "the user's edit after the turn\n"
    assert (repo / "f1.txt").read_text() == "1\n" and (repo / "a.txt").read_text() == "a\n"
    bad = tolaria(tolaria_home, "checkpoints", "--older-than", "3")
    assert bad.returncode == 2


def test_a_damaged_store_is_one_line_and_the_same_code_for_every_store_command(
        tmp_path: Path) -> None:
    """``chats``, ``chats --delete``, ``checkpoints``, ``changes`` open the store one way
    (tolaria/cli/storeopen.py): a database that is not one is said in one line, exit 1, and
    left as it was."""
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    damaged = home / "data" / "tolaria.sqlite3"
    damaged.write_bytes(b"not a database, " * 512)
    for args in (("chats",), ("chats", "--delete", "1", "--yes"), ("checkpoints",),
                 ("changes", "1"), ("undo", "1")):
        done = tolaria(home, *args)
        assert done.returncode == 1, (args, done.stderr)
        assert done.stderr.startswith("tolaria: cannot open the store: "), (args, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert damaged.read_bytes() == b"not a database, " * 512
