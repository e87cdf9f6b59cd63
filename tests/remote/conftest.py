"""The remote tier: runs over a real OpenSSH ``sshd`` on 127.0.0.1 (tests/remote/sshd.py).

Without sshd (or root, to make the remote account) the tier is skipped, and the end of the run
says so in red, like the real-CLI tier: ``.ci/run`` installs ``openssh-server`` for it.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.fake_model import FakeModelServer
from nonroot import other_uid_gid
from remote.sshd import REMOTE_USER, SKIPPED, SshServer, sshd_problem

#: Processes of the remote account that outlived the tier (said at the end of the run).
LEFT: list[str] = []


def _account_processes() -> dict[int, str]:
    """The remote account's live processes: pid -> command line."""
    try:
        uid = pwd.getpwnam(REMOTE_USER).pw_uid
    except KeyError:
        return {}
    found = {}
    for entry in os.listdir("/proc"):
        try:
            if not entry.isdigit() or os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                found[int(entry)] = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


@pytest.fixture(scope="session")
def sshd() -> Iterator[SshServer]:
    problem = sshd_problem()
    if problem is not None:
        message = f"REMOTE TIER SKIPPED: {problem}"
        if message not in SKIPPED:
            SKIPPED.append(message)
        pytest.skip(message)
    before = set(_account_processes())
    server = SshServer().start()
    yield server
    server.stop()
    # What the tier started on the remote account and left running (a kept supervisor whose
    # test did not clean up lives 24 h): said in red at the end, for whoever looks next. Only
    # said: another run on this machine may be using the account at the same time.
    deadline = time.monotonic() + 5
    while (left := {p: c for p, c in _account_processes().items() if p not in before}) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid, cmdline in sorted(left.items()):
        LEFT.append(f"REMOTE ACCOUNT PROCESS LEFT BEHIND: {pid} {cmdline[-160:]}")


@pytest.fixture(scope="session")
def model_server() -> Iterator[FakeModelServer]:
    """The e2e tier's scripted model on 127.0.0.1, for the real CLIs run on the host."""
    server = FakeModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder both accounts can write (the fake agent's pid files, the local home)."""
    folder = Path(tempfile.mkdtemp(prefix="tolaria-remote-work-", dir="/tmp"))
    os.chmod(folder, 0o777)
    home = folder / "home"
    home.mkdir()
    os.chown(home, *other_uid_gid())
    try:
        yield folder
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for message in SKIPPED + LEFT:
        terminalreporter.write_sep("!", message, red=True, bold=True)
