"""The window's File → "Import sessions from" a host over the real sshd (issue 25.6): a Claude
Code session file in the remote account's ~/.claude/projects becomes a chat on that host; ssh's
unknown-host-key question is answered in the window's dialog; the session changing on the host
between two imports (a half-written line) adds no half turn and no second chat. The local side
(the whole window, offscreen) runs as the non-root user: tests/ui/remote_import_case.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from nonroot import ROOT, as_other_user, other_user_python, python_env
from remote.remotegit import as_remote, remote_home
from remote.sshd import REMOTE_USER, SshServer
from remote.test_remote_import import CLAUDE_SESSION

CASE = ROOT / "tests" / "ui" / "remote_import_case.py"


def _ssh_config(sshd: SshServer, shared: Path, known: Path) -> Path:
    """An ssh config for ``target`` whose host key is not known yet: ssh asks."""
    config = shared / "ssh_config"
    config.write_text(
        f"Host target\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {REMOTE_USER}\n"
        f"  IdentityFile {sshd.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null\n"
        "  StrictHostKeyChecking ask\n  LogLevel ERROR\n")
    for path in (config, known):
        os.chown(path, sshd.local_uid, sshd.local_gid)
    return config


def test_the_windows_import_from_a_host_makes_chats_on_that_host(sshd: SshServer,
                                                                  shared: Path) -> None:
    there = remote_home()
    folder = os.path.join(there, ".claude", "projects", "-home-user-work")
    as_remote("mkdir", "-p", folder, cwd=there)
    session = os.path.join(folder, CLAUDE_SESSION.name)
    as_remote("cp", str(CLAUDE_SESSION), session, cwd=there)
    as_remote("chmod", "o+w", session, cwd=there)  # the case changes it between two imports
    known = shared / "known_hosts"
    known.write_text("")
    config = _ssh_config(sshd, shared, known)
    pictures = shared / "shots"
    pictures.mkdir()
    os.chmod(pictures, 0o777)
    case, out = shared / "case.json", shared / "case-out.json"
    case.write_text(json.dumps({"host": "target", "ssh_config": str(config), "out": str(out),
                                "session": session, "shots": str(pictures)}))
    env = python_env(shared / "home", TOLARIA_IMPORT_CASE=str(case),
                     QT_QPA_PLATFORM="offscreen")
    try:
        done = as_other_user([other_user_python(), "-m", "pytest", "-x", "-q", "-p",
                              "no:cacheprovider", "-o", "addopts=", str(CASE)],
                             env=env, cwd=ROOT, timeout=180)
        assert done.returncode == 0 and out.exists(), (done.stdout + done.stderr)[-4000:]
        result = json.loads(out.read_text())
    finally:
        subprocess.run(["rm", "-rf", os.path.join(there, ".claude")], check=False)
    assert "key fingerprint is SHA256:" in result["asked"]
    assert result["first"] == "From target: 1 chat imported: 1 from Claude Code", result
    ((chat, host, agent, turns),) = result["chats"]
    assert (host, agent) == ("target", "claude") and turns >= 1
    assert result["second"].startswith("From target: nothing new to import"), result
    assert result["after"] == [[chat, turns]], "no half turn, no second chat"
    assert (sshd.folder / "host_key.pub").read_text().split()[1] in known.read_text()
    if os.environ.get("TOLARIA_DOCS_SHOTS") == "1":
        for picture in pictures.glob("*.png"):
            shutil.copy(picture, ROOT / "docs" / picture.name)
    assert len(list(pictures.glob("*.png"))) == 4


def test_cancel_while_ssh_asks_kills_ssh_and_its_question(sshd: SshServer, shared: Path) -> None:
    known = shared / "known_hosts"
    known.write_text("")
    config = _ssh_config(sshd, shared, known)
    case, out = shared / "case.json", shared / "case-out.json"
    case.write_text(json.dumps({"host": "target", "ssh_config": str(config), "out": str(out),
                                "mode": "cancel"}))
    env = python_env(shared / "home", TOLARIA_IMPORT_CASE=str(case),
                     QT_QPA_PLATFORM="offscreen")
    done = as_other_user([other_user_python(), "-m", "pytest", "-x", "-q", "-p",
                          "no:cacheprovider", "-o", "addopts=", str(CASE)],
                         env=env, cwd=ROOT, timeout=180)
    assert done.returncode == 0 and out.exists(), (done.stdout + done.stderr)[-4000:]
    result = json.loads(out.read_text())
    assert result["headline"] == "Import from target cancelled: nothing was imported", result
    assert result["helpers"] == [] and result["new_chats"] == [], result
    assert not result["dialog_shown"], "the dialog goes with its last question"
    assert known.read_text() == "", "nothing answered, nothing added"
