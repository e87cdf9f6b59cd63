"""Checkpoints, diff review, revert and rewind of a git folder on a host (issue 25.6, ADR 0035):
git runs there, the same safety rules apply. The local side is the non-root user (it cannot
touch the remote account's files itself: whatever changes there went through ssh)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from nonroot import as_other_user, other_user_python, python_env
from remote.remotegit import as_remote, remote_home, remote_repo
from remote.sshd import ALIAS, SshServer, kill_remote

from tolaria.chats.checkpoints import NOT_GIT, TOO_WIDE

SCENARIO = Path(__file__).resolve().parents[1] / "fakes" / "remote_git_scenario.py"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
__all__ = ["remote_repo"]  # the fixture


def test_a_turn_on_a_host_is_checkpointed_reviewed_and_reverted_there_keeping_the_users_edit(
        sshd: SshServer, shared: Path, remote_repo: str) -> None:
    stream_id = f"ai-agent-stream-rgit{uuid.uuid4().hex[:10]}"
    plain = f"{remote_home()}/plain-{uuid.uuid4().hex[:6]}"
    as_remote("mkdir", plain, cwd=remote_home())
    spec = shared / "git-scenario.json"
    spec.write_text(json.dumps({"host": ALIAS, "ssh_config": str(sshd.config),
                                "repo": remote_repo, "stream_id": stream_id,
                                "home": remote_home(), "plain": plain}))
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
    assert not out["hunk_error"] and len(out["hunk_reverted"]) == 1, out
    assert out["notes_after_hunk"] == "one\ntwo\nthree\nfour\nfive\nuser line\n", out
    # Nothing of the host's repository was stored on this machine.
    assert out["local_store_refs"] in ([], ["gitconfig"]), out
    # The user's own repository: no Tolaria refs, its index and HEAD untouched.
    assert as_remote("git", "for-each-ref", cwd=remote_repo).count("refs/tolaria") == 0
    assert as_remote("git", "status", "--porcelain", cwd=remote_repo).split() == [
        "M", "notes.txt"]
    # The home folder there is not a git work tree (a dotfiles one would be refused as too
    # wide there, as locally); the chat's folder unset (its home) is too wide.
    assert out["notice_home"] == [NOT_GIT], out
    assert out["notice_empty"] == [TOO_WIDE], out
    assert out["notice_plain"] == [NOT_GIT], out
