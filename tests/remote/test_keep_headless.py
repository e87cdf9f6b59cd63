"""``tolaria run --host H --keep-running`` headless (ADR 0032, "Quit"): Ctrl+C (SIGINT) is the
user's Stop, and so is SIGHUP (the terminal closed): the kept run ends on the host, 0
survivors, the turn cancelled with what it said. ``tolaria abort ID`` from another terminal stops
it too. Only the window's Quit leaves a kept run running (test_keep_quit.py).
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from nonroot import tolaria_as_other_user
from remote.sshd import SshServer, kill_remote, remote_processes
from remote.test_remote_cli import _run, _settings

from tolaria.core.stream_id import new_stream_id


@pytest.mark.parametrize("how", ["SIGINT", "SIGHUP", "abort"])
def test_a_headless_kept_run_is_stopped_by_ctrl_c_a_hangup_or_abort(
        sshd: SshServer, shared: Path, how: str) -> None:
    home = shared / "home"
    _settings(home)
    sid = new_stream_id()
    run = _run(sshd, home, "--keep-running", "--agent", "demo", "--stream-id", sid, "--json",
               "run a long tool")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not remote_processes(sid):
            time.sleep(0.05)
        assert remote_processes(sid), "the agent never started on the host"
        time.sleep(0.5)  # some output first: it must be kept
        if how == "abort":
            aborted = tolaria_as_other_user(home, "abort", sid)
            assert aborted.stdout.strip() == "true", aborted.stderr
        else:
            run.send_signal(getattr(signal, how))
        out, err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        left = remote_processes(sid)
        kill_remote(sid)
    assert left == [], f"the kept run went on on the host after {how}"
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    done = events[-1]
    assert done["kind"] == "done" and done["stop_reason"] == "cancelled", (done, err)
    assert done["survivors"] == []
    assert any(e["kind"] in ("text_delta", "thinking_delta", "tool_start") for e in events), out
