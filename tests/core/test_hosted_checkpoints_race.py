"""Two Tolaria processes snapshot the same folder on a host at once (its store made by both):
both snapshots land, each under its own ref, and a third process reads both. The host is a
command target (``env``: Tolaria's git runner runs here through the bootstrap)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import git, git_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

SNAP = """
import json, sys
from pathlib import Path
from tolaria.core import checkpoints as ck
from tolaria.core.checkpoints.hosted import on_host
from tolaria.core.remote.hosts import Target
target = Target(prefix=("env",), python=sys.executable, cache_dir=sys.argv[3])
with on_host(target):
    if sys.argv[2] == "read":
        print(json.dumps([ck.load(Path(sys.argv[1]), f"refs/tolaria/race/{n}") is not None
                          for n in ("a", "b")]))
    else:
        done = ck.snapshot(Path(sys.argv[1]), f"refs/tolaria/race/{sys.argv[2]}")
        print(json.dumps({"commit": done.commit, "repo": str(done.repo)}))
"""


def test_two_processes_snapshot_one_remote_folder_at_once(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "proj", {"a.txt": "one\n"})
    (repo / "new.txt").write_text("untracked\n")
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "host-data"))
    cache = str(tmp_path / "cache")
    runs = [subprocess.Popen([sys.executable, "-c", SNAP, str(repo), name, cache], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name in ("a", "b")]
    outs = [run.communicate(timeout=120) for run in runs]
    for run, (_out, err) in zip(runs, outs, strict=True):
        assert run.returncode == 0, err
    a, b = (json.loads(out.strip().splitlines()[-1]) for out, _err in outs)
    assert a["repo"] == b["repo"] == str(repo)
    stores = list((tmp_path / "host-data" / "tolaria" / "checkpoints" / "stores").glob("*.git"))
    assert len(stores) == 1
    read = subprocess.run([sys.executable, "-c", SNAP, str(repo), "read", cache], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(read.stdout.strip().splitlines()[-1]) == [True, True]
    listed = subprocess.run(["git", "--git-dir", str(stores[0]), "for-each-ref"],
                            capture_output=True, text=True, check=True).stdout
    assert "refs/tolaria/race/a" in listed and "refs/tolaria/race/b" in listed
    assert "refs/tolaria" not in git(repo, "for-each-ref")
