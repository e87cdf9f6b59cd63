"""Running the local side of a remote run as the non-root user (tests/fakes/remote_scenario.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nonroot import as_other_user, other_user_python, python_env
from remote.sshd import ALIAS, SshServer, kill_remote

SCENARIO = Path(__file__).resolve().parents[1] / "fakes" / "remote_scenario.py"
FAKE_AGENT = Path(__file__).resolve().parents[1] / "fakes" / "fake_agent.py"


def run_local(sshd: SshServer, shared: Path, stream_id: str, timeout: float = 90,
              **cfg: Any) -> dict[str, Any]:
    """The scenario as the non-root local user; its JSON result."""
    cfg = {"host": ALIAS, "ssh_config": str(sshd.config), "stream_id": stream_id,
           "cwd": str(shared), **cfg}
    try:
        spec = shared / f"scenario-{stream_id}.json"
        spec.write_text(json.dumps(cfg))
        done = as_other_user([other_user_python(), str(SCENARIO), f"@{spec}"],
                             env=python_env(shared / "home"), cwd=shared / "home",
                             timeout=timeout)
    finally:
        kill_remote(stream_id)  # a failed test never leaves the remote tree behind
    if done.returncode != 0 or not done.stdout.strip():
        raise AssertionError(f"scenario failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result
