"""The remote chat's folder picker over real ssh (issue 25.6): the host's folders listed there,
a bad typed path refused with its one line, a path never read as shell text. The window's
dialog itself: tests/ui/test_remote_folder_picker.py."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from nonroot import as_other_user, other_user_python, python_env
from remote.remotegit import as_remote, remote_home, remote_repo
from remote.sshd import ALIAS, SshServer

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
__all__ = ["remote_repo"]  # the fixture


LISTING = """
import json, sys
from tolaria.core.remote.folders import list_folder
from tolaria.core.remote.hostcall import HostError
from tolaria.core.remote.hosts import parse_destination
target = parse_destination(sys.argv[1], ssh_config=sys.argv[2])
out = {}
for name, path in (("home", ""), ("repo", sys.argv[3]), ("missing", sys.argv[3] + "/nope"),
                   ("file", sys.argv[3] + "/notes.txt"), ("odd", sys.argv[3] + "/$(touch x)")):
    try:
        got = list_folder(target, path)
        out[name] = {"path": got.path, "git": got.is_git,
                     "folders": [[e.name, e.is_git] for e in got.folders]}
    except HostError as exc:
        out[name] = {"error": str(exc)}
print(json.dumps(out))
"""


def test_the_folder_picker_lists_the_hosts_folders_and_refuses_a_bad_path_in_one_line(
        sshd: SshServer, shared: Path, remote_repo: str) -> None:
    as_remote("mkdir", "-p", "sub/inner", cwd=remote_repo)
    home = shared / "home"
    done = as_other_user([other_user_python(), "-c", LISTING, ALIAS, str(sshd.config),
                          remote_repo], env=python_env(home), cwd=home, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    home_there = remote_home()
    assert out["home"]["path"] == home_there, out
    assert [os.path.basename(remote_repo), True] in out["home"]["folders"], out
    assert out["repo"] == {"path": remote_repo, "git": True, "folders": [["sub", False]]}, out
    assert out["missing"] == {"error": f"no such folder: {remote_repo}/nope on {ALIAS}"}
    assert out["file"] == {"error": f"not a folder: {remote_repo}/notes.txt on {ALIAS}"}
    # A path is an argument there, never shell text: nothing ran, the folder is just missing.
    assert out["odd"] == {"error": f"no such folder: {remote_repo}/$(touch x) on {ALIAS}"}
    assert not os.path.exists(os.path.join(home_there, "x"))
    assert not os.path.exists(os.path.join(remote_repo, "x"))

