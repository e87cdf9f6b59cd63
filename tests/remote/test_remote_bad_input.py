"""Bad input gets one clear line, quickly, and nothing is accepted silently (issue 25, item 9)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from remote.remotehelpers import run_local
from remote.sshd import REMOTE_USER, SshServer

from tolaria.core.stream_id import new_stream_id


def _config(sshd: SshServer, shared: Path, *, key: Path | None = None,
            known_hosts: Path | None = None, hostname: str = "127.0.0.1") -> Path:
    """An ssh config for one test: the server's alias with one thing changed."""
    config = shared / "ssh_config"
    config.write_text(
        f"Host target\n  HostName {hostname}\n  Port {sshd.port}\n  User {REMOTE_USER}\n"
        f"  IdentityFile {key or sshd.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known_hosts or sshd.known_hosts}\n"
        "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking ask\n  LogLevel ERROR\n")
    for path in (config, *(p for p in (key, known_hosts) if p is not None)):
        os.chown(path, sshd.local_uid, sshd.local_gid)
    return config


def _error(sshd: SshServer, shared: Path, config: Path | None = None, **cfg: Any) -> str:
    started = time.monotonic()
    result = run_local(sshd, shared, new_stream_id(), mode="normal", host="target",
                       ssh_config=str(config or _config(sshd, shared)), **cfg)
    assert time.monotonic() - started < 30, "no hang"
    assert result["stop_reason"] == "error", result
    assert len(result["errors"]) == 1, result
    error: str = result["errors"][0]
    assert "\n" not in error
    # The line is the whole story: no agent advice about the model API under it.
    assert result["hints"] == [""], result
    return error


def test_unknown_host(sshd: SshServer, shared: Path) -> None:
    error = _error(sshd, shared, _config(sshd, shared, hostname="no-such-host.invalid"))
    assert error.startswith("unknown host target"), error


def test_auth_failure(sshd: SshServer, shared: Path) -> None:
    stranger = shared / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)],
                   check=True)
    error = _error(sshd, shared, _config(sshd, shared, key=stranger))
    assert error.startswith("ssh could not log in to target (authentication failed"), error


def test_a_changed_host_key_is_refused(sshd: SshServer, shared: Path) -> None:
    other = shared / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    known = shared / "known_hosts"
    algo, key = (shared / "other_host_key.pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{sshd.port} {algo} {key}\n")
    error = _error(sshd, shared, _config(sshd, shared, known_hosts=known))
    assert error.startswith("the host key of target is changed; ssh refused"), error


def test_an_unknown_host_key_is_never_accepted(sshd: SshServer, shared: Path) -> None:
    known = shared / "known_hosts"
    known.write_text("")
    error = _error(sshd, shared, _config(sshd, shared, known_hosts=known))
    assert error.startswith("the host key of target is unknown; ssh refused"), error
    assert known.read_text() == ""  # nothing was added behind the user's back


def test_no_python_there(sshd: SshServer, shared: Path) -> None:
    error = _error(sshd, shared, python="python9.99")
    assert error.startswith("no Python on target to run Tolaria's supervisor"), error


def test_a_python_too_old(sshd: SshServer, shared: Path) -> None:
    old = shared / "oldpython"
    # A Python that says it is 3.7: the bootstrap must say so instead of failing later.
    old.write_text("#!/bin/sh\nexec python3 -c 'import sys; sys.version_info = (3, 7, 9); "
                   "code = sys.argv[2]; sys.argv = sys.argv[2:]; exec(code)' \"$@\"\n")
    old.chmod(0o755)
    error = _error(sshd, shared, python=str(old))
    assert error == ("target: python on this host is 3.7; Tolaria's supervisor needs 3.8 or "
                     "newer"), error


def test_cache_folder_not_writable(sshd: SshServer, shared: Path) -> None:
    error = _error(sshd, shared, cache_dir="/proc/tolaria-cache")
    assert error.startswith("target: cannot write Tolaria's cache folder /proc/tolaria-cache"), \
        error


def test_a_full_disk_on_the_host(sshd: SshServer, shared: Path) -> None:
    """The host's cache folder is on a full file system: one line, and no partial copy of the
    supervisor is left there."""
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root and mount")
    full = shared / "full"  # a folder both accounts reach
    full.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k,mode=0777", "tmpfs",
                              str(full)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        error = _error(sshd, shared, cache_dir=str(full))
        assert error.startswith(f"target: cannot write Tolaria's cache folder {full} on this "
                                "host: No space left on device"), error
        assert list(full.iterdir()) == []
    finally:
        subprocess.run(["umount", str(full)], check=False)


def test_a_missing_folder_and_a_missing_agent_there(sshd: SshServer, shared: Path) -> None:
    error = _error(sshd, shared, cwd="/no/such/folder")
    assert error == "target: working folder /no/such/folder does not exist on this host"
    error = _error(sshd, shared, command=["no-such-agent-cli", "{prompt}"])
    assert error.startswith("target: no-such-agent-cli is not installed on this host"), error


@pytest.mark.parametrize("host", ["-oProxyCommand=touch /tmp/x", "ssh://h:0", ""])
def test_bad_destinations_never_reach_ssh(host: str) -> None:
    from tolaria.core.remote.hosts import BadDestination, parse_destination

    with pytest.raises(BadDestination):
        parse_destination(host)
