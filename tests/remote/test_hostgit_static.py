"""Tolaria's git runner on a host (hostgit.py) runs on the host's own Python, like the
supervisor: shipped as the very bytes that are hashed (stdlib only and Python >= 3.8:
test_host_programs_static.py).
And a batch run here through the bootstrap, as a host would: no sshd needed."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tolaria.core.remote import bootstrap, hostgit
from tolaria.core.remote.hostcall import HostError, batch
from tolaria.core.remote.hosts import Target

SOURCE = Path(hostgit.__file__)


def test_the_bootstrap_brings_hostgit_by_its_hash(tmp_path: Path) -> None:
    argv = bootstrap.program_argv("hostgit", "python3", str(tmp_path))
    assert argv[3:5] == [hashlib.sha256(SOURCE.read_bytes()).hexdigest(),
                         str(len(SOURCE.read_bytes()))]
    assert '"hostgit-"' in argv[2] and '"supervisor-"' not in argv[2]
    assert '"hostgit-" + H + ".py"' in argv[2]  # one file, not the supervisor's bundle


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_batch_runs_through_the_bootstrap_and_stops_at_the_first_failure(
        tmp_path: Path) -> None:
    # A command target with no prefix runs the bootstrap right here: the first call brings
    # the file (TOLARIA-NEED), the second finds it by its hash.
    target = Target(prefix=("env",), python=sys.executable, cache_dir=str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for _ in range(2):
        results = batch(target, [{"op": "repo", "folder": str(repo)},
                                 {"op": "states", "repo": str(repo), "paths": ["none.txt"]},
                                 {"op": "read", "repo": str(repo), "path": "../outside"},
                                 {"op": "repo", "folder": str(repo)}])
        assert results[0] == {"top": str(repo)}
        assert results[1] == {"states": [["missing", "", ""]]}
        assert results[2] == {"error": "../outside is outside the working tree"}
        assert len(results) == 3, "a failed op ends the batch"
    assert len(list((tmp_path / "cache").glob("hostgit-*.py"))) == 1
    with pytest.raises(HostError, match="no /nonexistent/python3"):
        batch(Target(prefix=("env",), python="/nonexistent/python3"), [])


def test_a_cancelled_batch_kills_its_connection_at_once(tmp_path: Path) -> None:
    """A Stop during a before-snapshot on a host: the ssh (here a command that hangs) is killed
    within moments, and the snapshot says it was cancelled."""
    import threading
    import time

    from tolaria.core.checkpoints import Cancel
    from tolaria.core.remote.hostcall import Cancelled

    marker = tmp_path / "hung.pid"
    hang = Target(prefix=("sh", "-c", f'echo $$ > "{marker}"; exec sleep 60', "sh"))
    cancel = Cancel()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        batch(hang, [{"op": "repo", "folder": "/"}], cancel=cancel)
    assert time.monotonic() - started < 5
    pid = int(marker.read_text())
    import psutil

    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
