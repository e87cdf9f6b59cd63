"""With the portable backend forced, no code of Tolaria's opens anything under /proc: only
psutil does (ADR 0016; issue 24 item 2). An audit hook in each ``tolaria`` process looks at the
caller's frames of every such opening (tests/fakes/proc_audit.py): a run to its end, a run
stopped by ``tolaria abort`` from another process, and an abort that finds nothing (the
command-line scan for a run that does not listen yet). With the linux backend the same hook
sees Tolaria's own reads: proof that it sees what it should."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from helpers import cli_env, marker_pids, tool_sleeping

from tolaria.core.stream_id import new_stream_id

AUDIT = Path(__file__).resolve().parents[2] / "fakes" / "proc_audit.py"


def _audited(out: Path, *args: str, env: dict[str, str], cwd: Path
             ) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(AUDIT), str(out), *args], env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _report(out: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(out.read_text())
    return found


def _scenario(home: Path, work: Path, backend: str) -> dict[str, dict[str, Any]]:
    """The three paths, audited; each process's report by name."""
    env = cli_env(home, TOLARIA_PROCESS_BACKEND=backend)
    reports = {}
    done = _audited(work / "done.json", "run", "--agent", "demo", "hi", env=env, cwd=work)
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    reports["run"] = _report(work / "done.json")
    sid = new_stream_id()
    long_env = {**env, "TOLARIA_DEMO_TOOL_SECONDS": "60"}
    runner = _audited(work / "stopped.json", "run", "--json", "--grace", "0.5", "--stream-id",
                      sid, "--agent", "demo", "hello", env=long_env, cwd=work)
    try:
        deadline = time.monotonic() + 30
        while not tool_sleeping(sid):
            assert runner.poll() is None and time.monotonic() < deadline, "no tool ran"
            time.sleep(0.02)
        abort = _audited(work / "abort.json", "abort", sid, env=env, cwd=work)
        out, err = abort.communicate(timeout=60)
        assert (abort.returncode, out.strip()) == (0, "true"), err
        _out, err = runner.communicate(timeout=60)
        assert runner.returncode == 130, err
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate(timeout=10)
    assert marker_pids(sid) == []
    reports["stop"], reports["abort"] = _report(work / "stopped.json"), _report(work / "abort.json")
    # An id nobody runs: the abort scans every process's command line before it says false.
    unknown = _audited(work / "unknown.json", "abort", new_stream_id(), env=env, cwd=work)
    out, err = unknown.communicate(timeout=60)
    assert out.strip() == "false", err
    reports["scan"] = _report(work / "unknown.json")
    return reports


def test_with_the_portable_backend_only_psutil_opens_proc(tolaria_home: Path,
                                                         tmp_path: Path) -> None:
    reports = _scenario(tolaria_home, tmp_path, "portable")
    for name, report in reports.items():
        assert report["foreign"] == [], (name, report["foreign"][:3])
    # psutil did the reading (so the hook saw the openings it let through).
    assert reports["stop"]["psutil"] > 0
    assert reports["scan"]["psutil"] > 0


def test_the_audit_sees_tolarias_own_reads_with_the_linux_backend(tolaria_home: Path,
                                                                  tmp_path: Path) -> None:
    reports = _scenario(tolaria_home, tmp_path, "linux")
    for name in ("stop", "scan"):
        stacks = [" ".join(f["stack"]) for f in reports[name]["foreign"]]
        assert any("tolaria/core/process/proc" in s for s in stacks), (name, stacks[:3])
