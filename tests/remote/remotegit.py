"""The remote account's side of the remote-folder tests: commands run as that user (the test's
own setup, not through Tolaria) and a git repository in its home."""

from __future__ import annotations

import os
import pwd
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from remote.sshd import REMOTE_USER, SshServer


def as_remote(*argv: str, cwd: str) -> str:
    """A command run as the remote account, on its own (the test's setup)."""
    account = pwd.getpwnam(REMOTE_USER)
    env = {"HOME": account.pw_dir, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}",
                           "--clear-groups", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout


def remote_home() -> str:
    return pwd.getpwnam(REMOTE_USER).pw_dir


@pytest.fixture
def remote_repo(sshd: SshServer) -> Iterator[str]:
    """A git repository in the remote account's home: notes.txt committed."""
    home = remote_home()
    repo = os.path.join(home, f"proj-{uuid.uuid4().hex[:8]}")
    as_remote("mkdir", repo, cwd=home)
    as_remote("git", "init", "-q", cwd=repo)
    as_remote("sh", "-c", "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > notes.txt", cwd=repo)
    as_remote("git", "add", "notes.txt", cwd=repo)
    as_remote("git", "-c", "user.name=u", "-c", "user.email=u@h", "commit", "-q", "-m", "init",
              cwd=repo)
    yield repo
    subprocess.run(["rm", "-rf", repo], check=False)
