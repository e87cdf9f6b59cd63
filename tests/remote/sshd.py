"""A real OpenSSH server on 127.0.0.1 for the remote tier, and the two accounts around it.

- the remote account ``tolaria-remote`` (made with useradd, a home and a shell) is where the
  agents run; the server's own ``AuthorizedKeysFile`` holds the test's client key for it;
- the local side (Tolaria: the turn, its link and the ``ssh`` client) runs as the non-root
  ``tolaria-test`` user (tests/nonroot.py), so it *cannot* signal the remote account's processes:
  a stop that passes must have been done by the supervisor there;
- sshd has its own config, host key, port and pid file; ssh gets a config file with ``-F`` (it
  reads ``~/.ssh`` from the passwd entry, not ``$HOME``) with a throwaway known_hosts holding the
  server's host key, and ``StrictHostKeyChecking yes``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from nonroot import other_uid_gid

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
REMOTE_USER = "tolaria-remote"
ALIAS = "tolaria-test-host"
SKIPPED: list[str] = []


def sshd_problem() -> str | None:
    """Why the tier cannot run here (None: it can)."""
    if os.getuid() != 0:
        return "the remote tier needs root (it makes a second user and starts sshd)"
    if not os.path.isfile(SSHD) or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "OpenSSH (sshd, ssh, ssh-keygen) is not installed: apt-get install openssh-server"
    if shutil.which("setpriv") is None or shutil.which("useradd") is None:
        return "setpriv and useradd are needed"
    return None


def remote_account() -> pwd.struct_passwd:
    try:
        pwd.getpwnam(REMOTE_USER)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", REMOTE_USER], check=False,
                       capture_output=True)
    # No password, but not locked: with "!" sshd (without PAM) refuses even a key.
    subprocess.run(["usermod", "-p", "*", REMOTE_USER], check=False, capture_output=True)
    return pwd.getpwnam(REMOTE_USER)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SshServer:
    """sshd with its files in ``folder``; ``config`` is the client's ``-F`` file."""

    def __init__(self, netns: str | None = None) -> None:
        #: A network namespace to listen in (tests/remote/netns.py): ssh must run there too.
        self.netns = netns
        self.folder = Path(tempfile.mkdtemp(prefix="tolaria-sshd-", dir="/tmp"))
        os.chmod(self.folder, 0o755)
        self.port = _free_port()
        self.account = remote_account()
        self.local_uid, self.local_gid = other_uid_gid()
        self.config = self.folder / "ssh_config"
        self.known_hosts = self.folder / "known_hosts"
        self.client_key = self.folder / "client_key"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SshServer:
        f = self.folder
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(f / "host_key")],
                       check=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.client_key)],
                       check=True)
        # The server's own authorized_keys (not the account's ~/.ssh: two servers, a test run
        # and a bench, may run at once); StrictModes off as it lies under /tmp.
        keys = f / "authorized_keys"
        keys.write_text((f / "client_key.pub").read_text())
        os.chmod(keys, 0o644)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation folder
        (f / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {f / 'host_key'}\n"
            f"PidFile {f / 'sshd.pid'}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            f"PubkeyAuthentication yes\nUsePAM no\nAllowUsers {REMOTE_USER}\nStrictModes no\n"
            f"AuthorizedKeysFile {keys}\n"
            "PrintMotd no\nPrintLastLog no\nLogLevel ERROR\nClientAliveInterval 0\n"
            f"Subsystem sftp internal-sftp\nMaxStartups 50\nMaxSessions 50\n")
        host_pub = (f / "host_key.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        self.config.write_text(
            f"Host {ALIAS}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {REMOTE_USER}\n"
            f"Host *\n  IdentityFile {self.client_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n  LogLevel ERROR\n")
        for path in (self.client_key, self.known_hosts, self.config):
            os.chown(path, self.local_uid, self.local_gid)
        os.chmod(self.client_key, 0o600)
        inside = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.proc = subprocess.Popen([*inside, SSHD, "-D", "-e", "-f", str(f / "sshd_config")],
                                     stderr=subprocess.PIPE, start_new_session=True)
        if self.netns:
            return self._wait_inside(inside)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port),
                                                                        timeout=1):
                return self
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"sshd did not start: {err}")
            time.sleep(0.05)
        raise RuntimeError("sshd did not listen within 10 s")

    def _wait_inside(self, inside: list[str]) -> SshServer:
        """Wait for sshd to listen, seen from its namespace."""
        probe = ("import socket, sys, time\nfor _ in range(200):\n    try:\n"
                 f"        socket.create_connection(('127.0.0.1', {self.port}), 1).close()\n"
                 "        sys.exit(0)\n    except OSError:\n        time.sleep(0.05)\nsys.exit(1)")
        done = subprocess.run([*inside, "python3", "-c", probe], check=False, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"sshd did not listen in the namespace {self.netns}")
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stderr is not None:
                self.proc.stderr.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def remote_processes(stream_id: str) -> list[int]:
    """The remote account's live processes of ``stream_id`` (by marker), seen as root."""
    uid = pwd.getpwnam(REMOTE_USER).pw_uid
    needle = f"TOLARIA_STREAM_ID={stream_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def kill_remote(stream_id: str) -> None:
    for pid in remote_processes(stream_id):
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
