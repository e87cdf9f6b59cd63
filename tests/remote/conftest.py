"""The remote tier: runs over a real OpenSSH ``sshd`` on 127.0.0.1 (tests/remote/sshd.py).

Without sshd (or root, to make the remote account) the tier is skipped, and the end of the run
says so in red, like the real-CLI tier: ``.ci/run`` installs ``openssh-server`` for it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.fake_model import FakeModelServer
from nonroot import other_uid_gid
from remote.sshd import SKIPPED, SshServer, sshd_problem


@pytest.fixture(scope="session")
def sshd() -> Iterator[SshServer]:
    problem = sshd_problem()
    if problem is not None:
        message = f"REMOTE TIER SKIPPED: {problem}"
        if message not in SKIPPED:
            SKIPPED.append(message)
        pytest.skip(message)
    server = SshServer().start()
    yield server
    server.stop()


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
    for message in SKIPPED:
        terminalreporter.write_sep("!", message, red=True, bold=True)
