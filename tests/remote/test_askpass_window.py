"""ssh's own questions answered in the window (issue 25 item 1, ADR 0033), over the real sshd of
this tier, the local side (the whole window, offscreen) run as the non-root user:

- an unknown host key (empty known_hosts, ``StrictHostKeyChecking ask``) answered Yes in the
  chat's card: the turn runs and known_hosts holds the key; answered No: the turn ends with
  ssh's refusal and known_hosts is unchanged;
- a passphrase-protected key answered in the masked field: the turn runs, and the passphrase is
  in no log, no stored event, no transcript (the store and every file of the local home are
  searched for it, and the case's own output).

``TOLARIA_DOCS_SHOTS=1``: the card's pictures go to docs/ (light and dark)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from nonroot import ROOT, as_other_user, other_user_python, python_env
from remote.sshd import REMOTE_USER, SshServer

CASE = ROOT / "tests" / "ui" / "remote_askpass_case.py"
PASSPHRASE = "correct horse 42 battery"


def _config(sshd: SshServer, shared: Path, known: Path, key: Path) -> Path:
    config = shared / "ssh_config"
    config.write_text(
        f"Host target\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {REMOTE_USER}\n"
        f"  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
        "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking ask\n  LogLevel ERROR\n")
    for path in (config, known, key):
        os.chown(path, sshd.local_uid, sshd.local_gid)
    return config


def _window(sshd: SshServer, shared: Path, config: Path, answers: list[str],
            shots: bool = False, mode: str = "turn") -> tuple[dict[str, Any], str]:
    home = shared / "home"
    pictures = shared / "shots"
    pictures.mkdir(exist_ok=True)
    os.chmod(pictures, 0o777)
    case = shared / "case.json"
    out = shared / "case-out.json"
    case.write_text(json.dumps({"host": "target", "answers": answers, "out": str(out),
                                "mode": mode,
                                "ssh_config": str(config),
                                "shots": str(pictures) if shots else ""}))
    env = python_env(home, TOLARIA_ASKPASS_CASE=str(case), QT_QPA_PLATFORM="offscreen")
    env.pop("SSH_AUTH_SOCK", None)  # no agent: the key's passphrase must be asked
    done = as_other_user([other_user_python(), "-m", "pytest", "-x", "-q", "-p",
                          "no:cacheprovider", "-o", "addopts=", str(CASE)],
                         env=env, cwd=ROOT, timeout=180)
    logs = done.stdout + done.stderr
    assert done.returncode == 0 and out.exists(), logs[-4000:]
    if shots and os.environ.get("TOLARIA_DOCS_SHOTS") == "1":
        for picture in pictures.glob("*.png"):
            shutil.copy(picture, ROOT / "docs" / picture.name)
    return json.loads(out.read_text()), logs


def test_an_unknown_host_key_answered_yes_runs_and_is_kept(sshd: SshServer,
                                                           shared: Path) -> None:
    known = shared / "known_hosts"
    known.write_text("")
    config = _config(sshd, shared, known, sshd.client_key)
    result, _logs = _window(sshd, shared, config, ["yes"], shots=True)
    (asked,) = result["asked"]
    assert asked["kind"] == "confirm"
    assert "Are you sure you want to continue connecting (yes/no" in asked["prompt"]
    assert "key fingerprint is SHA256:" in asked["prompt"]  # ssh's words, verbatim
    assert result["status"] == "completed", result
    assert result["open_cards"] == 0
    host_key = (sshd.folder / "host_key.pub").read_text().split()[1]
    assert host_key in known.read_text(), "ssh added the key the user accepted"


def test_an_unknown_host_key_answered_no_is_refused(sshd: SshServer, shared: Path) -> None:
    known = shared / "known_hosts"
    known.write_text("")
    config = _config(sshd, shared, known, sshd.client_key)
    result, _logs = _window(sshd, shared, config, ["no"])
    assert result["asked"][0]["kind"] == "confirm"
    assert result["status"] != "completed", result
    (error,) = result["errors"]
    assert error.startswith("the host key of target is unknown; ssh refused"), error
    assert known.read_text() == "", "nothing added when the user said no"


def test_a_passphrase_answered_in_the_masked_field_is_never_kept(sshd: SshServer,
                                                                 shared: Path) -> None:
    key = shared / "locked_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", PASSPHRASE, "-f", str(key)],
                   check=True)
    keys = sshd.folder / "authorized_keys"
    before = keys.read_text()
    keys.write_text(before + (shared / "locked_key.pub").read_text())
    try:
        known = shared / "known_hosts"
        shutil.copy(sshd.known_hosts, known)
        config = _config(sshd, shared, known, key)
        result, logs = _window(sshd, shared, config, [PASSPHRASE], shots=True)
    finally:
        keys.write_text(before)
    (asked,) = result["asked"]
    assert asked["kind"] == "secret" and "passphrase" in asked["prompt"].lower(), asked
    assert result["status"] == "completed", result
    secret = PASSPHRASE.encode()
    assert secret not in logs.encode()
    assert secret not in json.dumps(result).encode()
    for path in (shared / "home").rglob("*"):  # the store (every event), logs, drafts, crash
        if path.is_file():
            assert secret not in path.read_bytes(), f"the passphrase is in {path}"


def test_a_look_at_the_hosts_agents_asks_in_the_chat_and_goes_on_after_yes(
        sshd: SshServer, shared: Path) -> None:
    """#25: the picker's look (ADR 0034) no longer fails on an unknown host key with BatchMode:
    ssh's question shows in the chat on that host, and Yes lets the look find the agents."""
    known = shared / "known_hosts"
    known.write_text("")
    config = _config(sshd, shared, known, sshd.client_key)
    result, _logs = _window(sshd, shared, config, ["yes"], mode="look-chat")
    (asked,) = result["asked"]
    assert asked["kind"] == "confirm" and "key fingerprint is SHA256:" in asked["prompt"]
    assert asked["title"] == "ssh asks, connecting to target"
    assert result["pane_asked"] and not result["dialog_shown"]
    assert result["error"] is None, result
    assert result["agents"], "the look answered with the host's agents"
    assert result["open_cards"] == 0
    host_key = (sshd.folder / "host_key.pub").read_text().split()[1]
    assert host_key in known.read_text(), "ssh added the key the user accepted"


def test_a_look_with_no_chat_on_the_host_asks_in_a_dialog(sshd: SshServer,
                                                          shared: Path) -> None:
    known = shared / "known_hosts"
    known.write_text("")
    config = _config(sshd, shared, known, sshd.client_key)
    result, _logs = _window(sshd, shared, config, ["yes"], mode="look-dialog")
    (asked,) = result["asked"]
    assert asked["kind"] == "confirm" and asked["title"] == "ssh asks, connecting to target"
    assert result["error"] is None and result["agents"], result
    assert not result["dialog_shown"], "the dialog goes away with its last question"
    assert (sshd.folder / "host_key.pub").read_text().split()[1] in known.read_text()


def test_a_look_answered_no_says_ssh_refused_and_keeps_known_hosts(sshd: SshServer,
                                                                   shared: Path) -> None:
    known = shared / "known_hosts"
    known.write_text("")
    config = _config(sshd, shared, known, sshd.client_key)
    result, _logs = _window(sshd, shared, config, ["no"], mode="look-dialog")
    assert result["asked"][0]["kind"] == "confirm"
    assert result["error"].startswith("the host key of target is unknown"), result
    assert not result["agents"]
    assert known.read_text() == "", "nothing added when the user said no"
