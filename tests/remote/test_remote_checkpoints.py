"""Checkpoints, diff review, revert and rewind of a git folder on a host (issue 25.6, ADR 0035):
git runs there, the same safety rules apply. The local side is the non-root user (it cannot
touch the remote account's files itself: whatever changes there went through ssh)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from nonroot import as_other_user, other_user_python, python_env
from remote.sshd import ALIAS, REMOTE_USER, SshServer, kill_remote

SCENARIO = Path(__file__).resolve().parents[1] / "fakes" / "remote_git_scenario.py"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def as_remote(*argv: str, cwd: str) -> str:
    """A command run as the remote account, on its own (the test's setup)."""
    account = pwd.getpwnam(REMOTE_USER)
    env = {"HOME": account.pw_dir, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}",
                           "--clear-groups", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout


@pytest.fixture
def remote_repo(sshd: SshServer) -> Iterator[str]:
    home = pwd.getpwnam(REMOTE_USER).pw_dir
    repo = os.path.join(home, f"proj-{uuid.uuid4().hex[:8]}")
    as_remote("mkdir", repo, cwd=home)
    as_remote("git", "init", "-q", cwd=repo)
    as_remote("sh", "-c", "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > notes.txt", cwd=repo)
    as_remote("git", "add", "notes.txt", cwd=repo)
    as_remote("git", "-c", "user.name=u", "-c", "user.email=u@h", "commit", "-q", "-m", "init",
              cwd=repo)
    yield repo
    subprocess.run(["rm", "-rf", repo], check=False)


def test_a_turn_on_a_host_is_checkpointed_reviewed_and_reverted_there_keeping_the_users_edit(
        sshd: SshServer, shared: Path, remote_repo: str) -> None:
    stream_id = f"ai-agent-stream-rgit{uuid.uuid4().hex[:10]}"
    spec = shared / "git-scenario.json"
    spec.write_text(json.dumps({"host": ALIAS, "ssh_config": str(sshd.config),
                                "repo": remote_repo, "stream_id": stream_id}))
    home = shared / "home"
    try:
        done = as_other_user([other_user_python(), str(SCENARIO), f"@{spec}"],
                             env=python_env(home), cwd=home, timeout=240)
    finally:
        kill_remote(stream_id)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["agent"] == "end_turn", out
    # The checkpoints before and after were taken on the host: the turn's files.
    assert out["files"] == [["new.txt", "added"], ["notes.txt", "modified"]], out
    assert out["notices"] == [], out
    assert "+TWO by the agent" in out["diff"] and not out["review_error"], out
    # The user's edit after the turn: revert and rewind ask (nothing written before the yes).
    assert out["revert_asked"]["done"] is False and out["revert_asked"]["needs_confirm"]
    assert out["revert_asked"]["files"] == [["notes.txt", "merge", "changed since this turn"]]
    assert out["rewind_asked"]["done"] is False and out["rewind_asked"]["needs_confirm"]
    assert ["notes.txt", "restore", "changed since turn 1"] in out["rewind_asked"]["files"]
    assert out["notes_untouched"] is True and out["new_still_there"] == "yes"
    # A file the user did not touch reverts at once, on the host.
    assert out["new_reverted"] is True and out["new_after_revert"] == "no"
    # With the yes: the agent's line taken out, the user's kept; Undo gives the bytes back.
    assert out["merged_done"] is True
    assert out["notes_after_yes"] == "one\ntwo\nthree\nfour\nfive\nuser line\n"
    assert out["undo_done"] is True and out["notes_after_undo"] == out["user_notes"]
    # Nothing of the host's repository was stored on this machine.
    assert out["local_store_refs"] in ([], ["gitconfig"]), out
    # The user's own repository: no Tolaria refs, its index and HEAD untouched.
    assert as_remote("git", "for-each-ref", cwd=remote_repo).count("refs/tolaria") == 0
    assert as_remote("git", "status", "--porcelain", cwd=remote_repo).split() == [
        "M", "notes.txt"]


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
    remote_home = pwd.getpwnam(REMOTE_USER).pw_dir
    assert out["home"]["path"] == remote_home, out
    assert [os.path.basename(remote_repo), True] in out["home"]["folders"], out
    assert out["repo"] == {"path": remote_repo, "git": True, "folders": [["sub", False]]}, out
    assert out["missing"] == {"error": f"no such folder: {remote_repo}/nope on {ALIAS}"}
    assert out["file"] == {"error": f"not a folder: {remote_repo}/notes.txt on {ALIAS}"}
    # A path is an argument there, never shell text: nothing ran, the folder is just missing.
    assert out["odd"] == {"error": f"no such folder: {remote_repo}/$(touch x) on {ALIAS}"}
    assert not os.path.exists(os.path.join(remote_home, "x"))
    assert not os.path.exists(os.path.join(remote_repo, "x"))


CLAUDE_SESSION = (Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "claude"
                  / ".claude" / "projects" / "-home-user-work"
                  / "3f433ab6-a368-406f-96fc-fa2b37961ab2.jsonl")
HOSTS_OF_CHATS = """
import json
from tolaria.chats.saved_runs import open_store
store = open_store()
print(json.dumps([[c.id, c.host, c.agent] for c in store.list_conversations()]))
store.close()
"""


def test_import_from_a_host_brings_its_claude_sessions_as_chats_on_that_host(
        sshd: SshServer, shared: Path) -> None:
    remote_home = pwd.getpwnam(REMOTE_USER).pw_dir
    folder = os.path.join(remote_home, ".claude", "projects", "-home-user-work")
    as_remote("mkdir", "-p", folder, cwd=remote_home)
    target = os.path.join(folder, CLAUDE_SESSION.name)
    as_remote("cp", str(CLAUDE_SESSION), target, cwd=remote_home)
    home = shared / "home"
    env = python_env(home)
    argv = [other_user_python(), "-m", "tolaria", "import", "--host", ALIAS, "--ssh-config",
            str(sshd.config), "--from", "claude", "--json"]
    try:
        done = as_other_user(argv, env=env, cwd=home, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        (item,) = report["imported"]
        assert item["agent"] == "claude" and item["turns_added"] >= 1, report
        assert item["session_id"] == CLAUDE_SESSION.stem
        listed = as_other_user([other_user_python(), "-c", HOSTS_OF_CHATS], env=env, cwd=home)
        chats = json.loads(listed.stdout.strip().splitlines()[-1])
        assert [item["conversation_id"], ALIAS, "claude"] in chats, chats
        # Again: nothing new there, nothing imported twice; the host's file is only read.
        again = as_other_user(argv, env=env, cwd=home, timeout=120)
        assert json.loads(again.stdout.strip().splitlines()[-1])["unchanged"] == 1
        assert Path(target).read_bytes() == CLAUDE_SESSION.read_bytes()
        # A host that cannot be reached: one line, exit 1.
        bad = as_other_user([*argv[:5], "nowhere.invalid", *argv[6:-1]], env=env, cwd=home,
                            timeout=120)
        assert bad.returncode == 1 and len(bad.stdout.strip().splitlines()) == 1, bad.stdout
        assert bad.stdout.startswith("tolaria import: nowhere.invalid: "), bad.stdout
    finally:
        subprocess.run(["rm", "-rf", os.path.join(remote_home, ".claude")], check=False)
