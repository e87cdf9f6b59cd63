"""A command target (issue 25, item 8): the supervisor started through a command prefix instead
of ssh, here a real namespace runner: ``unshare`` with a user and PID namespace of its own (as
``docker exec -i``, ``kubectl exec -i POD --`` or ``wsl -d X --`` would be configured)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from nonroot import other_user_prefix
from remote.remotehelpers import run_local
from remote.sshd import SshServer

from tolaria.core.stream_id import new_stream_id

UNSHARE = "exec:unshare --user --map-root-user --pid --fork --mount-proc"


@pytest.fixture
def namespaces() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is missing")
    probe = subprocess.run([*other_user_prefix(), *UNSHARE[5:].split(), "true"],
                           capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no user namespaces here: {probe.stderr.decode(errors='replace')[:200]}")


@pytest.mark.usefixtures("namespaces")
@pytest.mark.parametrize("mode", ["normal", "ignore_term_tree", "daemon"])
def test_a_run_through_a_namespace_runner(sshd: SshServer, shared: Path, mode: str) -> None:
    sid = new_stream_id()
    action = "finish" if mode == "normal" else "stop"
    result = run_local(sshd, shared, sid, host=UNSHARE, mode=mode, action=action,
                       cache_dir=str(shared / "home" / "cache"))
    if mode == "normal":
        assert result["stop_reason"] == "end_turn", result
        assert result["text"] == "Hello from fake" + "Finished."
        return
    assert result["stop_reason"] == "cancelled", result
    assert result["survivors"] == [], result
    assert marked(sid) == [], "left behind"


def marked(stream_id: str) -> list[int]:
    """Live processes of any user that carry the run's marker (seen as root, from outside the
    namespace)."""
    needle = f"TOLARIA_STREAM_ID={stream_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0") and \
                    b") Z" not in (entry / "stat").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found
