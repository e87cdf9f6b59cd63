"""``tolaria import --host H`` over real ssh (issue 25.6): a Claude Code session file placed in
the remote account's ~/.claude/projects becomes a chat whose host is H; again, nothing twice;
an unreachable host is one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from nonroot import as_other_user, other_user_python, python_env
from remote.remotegit import as_remote, remote_home
from remote.sshd import ALIAS, SshServer

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
    home_there = remote_home()
    folder = os.path.join(home_there, ".claude", "projects", "-home-user-work")
    as_remote("mkdir", "-p", folder, cwd=home_there)
    target = os.path.join(folder, CLAUDE_SESSION.name)
    as_remote("cp", str(CLAUDE_SESSION), target, cwd=home_there)
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
        subprocess.run(["rm", "-rf", os.path.join(home_there, ".claude")], check=False)
