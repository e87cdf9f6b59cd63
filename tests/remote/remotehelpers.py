"""Running the local side of a remote run as the non-root user (tests/fakes/remote_scenario.py)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nonroot import as_other_user, other_user_prefix, other_user_python, python_env
from remote.sshd import ALIAS, SshServer, kill_remote, remote_processes

SCENARIO = Path(__file__).resolve().parents[1] / "fakes" / "remote_scenario.py"
FAKE_AGENT = Path(__file__).resolve().parents[1] / "fakes" / "fake_agent.py"
#: The turn engine as the window runs it, with a keep-running chat (tests/fakes/remote_engine.py).
ENGINE = Path(__file__).resolve().parents[1] / "fakes" / "remote_engine.py"


def engine_home(sshd: SshServer, shared: Path) -> tuple[Path, dict[str, Any]]:
    """The local home of ``ENGINE`` (a ticker agent run on the host, ssh through ``sshd``) and
    its JSON config: the store, the host, the folder."""
    home = shared / "home"
    (home / "adapters").mkdir()
    (home / "adapters" / "ticker.toml").write_text(
        f'id = "ticker"\nname = "Ticker"\nprotocol = "claude-stream-json"\n'
        f'command = ["python3", "{FAKE_AGENT}", "ticker", "{{prompt}}"]\n'
        f'[env]\nFAKE_PIDFILE = "{shared / "pids"}"\nFAKE_TICK_S = "0.01"\n')
    (home / "settings.toml").write_text(
        f'[remote]\nssh_config = "{sshd.config}"\ncache_dir = "{shared / "cache"}"\n'
        'disconnect_seconds = 1\n')
    return home, {"db": str(home / "store.sqlite3"), "host": ALIAS, "cwd": str(shared)}


def run_local(sshd: SshServer, shared: Path, stream_id: str, timeout: float = 90,
              inside: Sequence[str] = (), keep_remote: bool = False,
              **cfg: Any) -> dict[str, Any]:
    """The scenario as the non-root local user (``inside`` a network namespace: its ``ip
    netns exec`` prefix); its JSON result, with ``remote_left``: the run's processes alive on
    the remote account once the scenario returned (seen as root, before they are cleaned up). ``keep_remote``: a kept run that another
    scenario reattaches to is not cleaned up here."""
    cfg = {"host": ALIAS, "ssh_config": str(sshd.config), "stream_id": stream_id,
           "cwd": str(shared), **cfg}
    try:
        spec = shared / f"scenario-{stream_id}.json"
        spec.write_text(json.dumps(cfg))
        argv = [other_user_python(), str(SCENARIO), f"@{spec}"]
        env, home = python_env(shared / "home"), shared / "home"
        if inside:  # root enters the namespace, then becomes the local user
            done = subprocess.run([*inside, *other_user_prefix(), *argv], env=env, cwd=home,
                                  capture_output=True, text=True, timeout=timeout,
                                  check=False, stdin=subprocess.DEVNULL)
        else:
            done = as_other_user(argv, env=env, cwd=home, timeout=timeout)
        left = remote_processes(stream_id)
    finally:
        if not keep_remote:
            kill_remote(stream_id)  # a failed test never leaves the remote tree behind
    if done.returncode != 0 or not done.stdout.strip():
        raise AssertionError(f"scenario failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    result["remote_left"] = left
    return result
