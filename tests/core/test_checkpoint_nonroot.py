"""Unreadable files are skipped and listed, never fatal (issue 21 item 5), as a non-root user (root
reads everything): a ``chmod 000`` file, an unreadable folder, and root-owned 0600 files (one
untracked, one replacing a tracked file) as Docker or sudo leave them."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from nonroot import as_other_user, other_user_python, python_env, world_reachable_folder

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

SCRIPT = """
import json, sys
from pathlib import Path
from tolaria.core import checkpoints as ck
repo = Path(sys.argv[1])
before = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
(repo / "a.txt").write_text("edited by the turn\\n")
after = ck.snapshot(repo, ck.ref_name("1", "1", "after"))
print(json.dumps({"skipped": before.skipped.to_json(), "summary": before.skipped.summary(),
                  "changes": [[c.path, c.status] for c in ck.changes(before, after)]}))
"""


def test_unreadable_files_are_listed_not_fatal() -> None:
    with world_reachable_folder(owner_is_other_user=True) as folder:
        home, repo = folder / "home", folder / "repo"
        env = python_env(home, GIT_AUTHOR_NAME="u", GIT_AUTHOR_EMAIL="u@x",
                         GIT_COMMITTER_NAME="u", GIT_COMMITTER_EMAIL="u@x")
        setup = (f"mkdir -p {home} {repo} && cd {repo} && git init -q -b main && "
                 "echo a > a.txt && echo t > tracked.txt && git add -A && git commit -qm x && "
                 "echo secret > locked.txt && chmod 000 locked.txt && "
                 "mkdir private && echo p > private/p.txt && chmod 000 private")
        done = as_other_user(["sh", "-c", setup], env=env, cwd=folder)
        assert done.returncode == 0, done.stderr
        as_root = os.getuid() == 0
        if as_root:  # what `sudo` or a container leaves behind in the user's tree
            for name in ("root.key", "tracked.txt"):
                (repo / name).unlink(missing_ok=True)
                (repo / name).write_text("root only\n")
                os.chmod(repo / name, 0o600)
        done = as_other_user([other_user_python(), "-c", SCRIPT, str(repo)], env=env, cwd=home)
        assert done.returncode == 0, done.stderr
        found = json.loads(done.stdout)
        unreadable = set(found["skipped"]["unreadable"])
        assert {"locked.txt", "private/"} <= unreadable
        if as_root:
            assert {"root.key", "tracked.txt"} <= unreadable
        assert found["changes"] == [["a.txt", "modified"]]
        assert "unreadable" in found["summary"]
