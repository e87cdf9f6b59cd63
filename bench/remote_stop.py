"""Stop over ssh next to the same stop here: latency and survivors, one run. See
docs/PERFORMANCE.md ("Stopping a run on another machine").

    sudo .venv/bin/python bench/remote_stop.py [--stops 5] [--modes hang,tree3,...]

Root is needed for the setup the remote test tier uses (tests/remote/sshd.py): a real OpenSSH
sshd on 127.0.0.1, the agents as the ``tolaria-remote`` account, and the local side as the
non-root ``tolaria-test`` user (so only the supervisor there can have ended the remote tree).

For each mode of the fake agent (tests/fakes/fake_agent.py), ``--stops`` times each:

- ``local``: tests/fakes/stop_scenario.py, the run on this machine, abort -> ``done``;
- ``ssh``: tests/fakes/remote_scenario.py, the run on the host through ssh, abort -> ``done``
  (``done`` comes after the supervisor reported the remote tree gone, so this bounds "remote
  tree gone" from above); survivors counted from the remote's view (/proc, as root) at ``done``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from nonroot import (  # noqa: E402  (tests/ is the import root of the test helpers)
    as_other_user,
    other_uid_gid,
    other_user_python,
    python_env,
)
from remote.remotehelpers import run_local  # noqa: E402
from remote.sshd import SshServer, kill_remote, sshd_problem  # noqa: E402

from tolaria.core.stream_id import new_stream_id  # noqa: E402

STOP_SCENARIO = ROOT / "tests" / "fakes" / "stop_scenario.py"
MODES = ("tree3", "ignore_term_tree", "daemon", "scrubbed_daemon", "hopper")


def _shared() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="tolaria-bench-remote-", dir="/tmp"))
    folder.chmod(0o777)
    (folder / "home").mkdir()
    os.chown(folder / "home", *other_uid_gid())
    return folder


def local_stop(mode: str) -> tuple[float, int]:
    work = _shared()
    try:
        os.chown(work, *other_uid_gid())
        done = as_other_user([other_user_python(), str(STOP_SCENARIO), mode, str(work)],
                             env=python_env(work / "home"), cwd=work, timeout=120)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        return float(result["stop_ms"]), len(result["alive"]) + len(result["survivors"])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def remote_stop(sshd: SshServer, mode: str) -> tuple[float, int]:
    shared = _shared()
    sid = new_stream_id()
    try:
        result = run_local(sshd, shared, sid, mode=mode, action="stop", wait_for="text_delta",
                           env={"FAKE_PIDFILE": str(shared / "pids"),
                                "FAKE_HOPLOG": str(shared / "hops")})
        if result["stop_reason"] != "cancelled" or result["stop_ms"] is None:
            raise SystemExit(f"{mode}: the run was not stopped: {result}")
        left = len(result["remote_left"]) + len(result["survivors"])
        return float(result["stop_ms"]), left
    finally:
        kill_remote(sid)
        shutil.rmtree(shared, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stops", type=int, default=5)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    problem = sshd_problem()
    if problem is not None:
        print(f"cannot run: {problem}", file=sys.stderr)
        return 2
    sshd = SshServer().start()
    rows = []
    try:
        for mode in args.modes.split(","):
            local = [local_stop(mode) for _ in range(args.stops)]
            remote = [remote_stop(sshd, mode) for _ in range(args.stops)]
            rows.append((mode, statistics.median(t for t, _ in local),
                         max(t for t, _ in local), sum(n for _, n in local),
                         statistics.median(t for t, _ in remote), max(t for t, _ in remote),
                         sum(n for _, n in remote)))
            print(f"{mode}: done", file=sys.stderr, flush=True)
    finally:
        sshd.stop()
    print(f"| mode | local median ms | local max ms | local survivors | ssh median ms | "
          f"ssh max ms | ssh survivors |  ({args.stops} stops each)")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, lm, lx, ls, rm, rx, rs in rows:
        print(f"| {mode} | {lm:.0f} | {lx:.0f} | {ls} | {rm:.0f} | {rx:.0f} | {rs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
