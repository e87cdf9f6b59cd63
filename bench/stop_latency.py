"""Stop latency: time from abort to "every process of the run is gone". See docs/PERFORMANCE.md.

    python bench/stop_latency.py [--stops 50] [--grace 0.5] [--trees obey,ignore,busy]
                                 [--backends linux,portable]

Each tree imitates a real agent CLI (cli-agents.md, "How they die"): an *agent* prints one
claude-stream-json ``system/init`` line and starts a *tool* in a NEW SESSION (like every real
CLI's shell tool); the tool starts a *grandchild* (``sleep``: the dev server / test runner),
writes the three pids to a pidfile, and everyone sleeps. ``obey`` keeps the default SIGTERM/SIGINT
behaviour; ``ignore`` sets both to SIG_IGN in every process (``sleep`` inherits it through exec):
Tolaria reads SigIgn and sends SIGKILL at once, so no grace is spent on it. ``busy`` is the
``obey`` tree while ``--busy N`` (400) unrelated idle processes exist: the stop signals the known
tree first, so its time must not grow with the machine's process count.

Every row runs with each process backend (``--backends``, tolaria/core/process/backend.py):
``linux`` (/proc, subreaper) and ``portable`` (psutil + POSIX, what macOS uses; the bench is no
subreaper then).

``tolaria`` stops it with the real backend (``stream_ai_agent`` + ``registry.abort``), timed to the
moment the bench itself sees every process gone (and to ``done``). ``baseline`` is a naive
registry: Popen(start_new_session=True), SIGKILL the direct child only, count what is still alive
``--baseline-wait`` s later. "Gone" is checked independently of Tolaria, by a separate monitor
process: pidfile pids polled with psutil every 1 ms (pid + create time; zombies count as gone),
then a ``/proc/*/environ`` scan for ``TOLARIA_STREAM_ID=<id>`` (anything found is polled too).
Every process the bench learns of is SIGKILLed (with its group) in a ``finally``, also on Ctrl+C
or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cli_abort import CliAbort, print_startup, startup_times  # noqa: E402  (bench/)
from stop_report import Series, Stop, as_json, p95, report  # noqa: E402  (bench/)
from stop_tree import (  # noqa: E402  (bench/)
    MARKER,
    MONITOR_SCRIPT,
    POLL_S,
    SPAWN_TIMEOUT_S,
    TREE_LIFETIME_S,
    TREE_SCRIPT,
    Cleanup,
    Monitor,
    TreeNotUp,
    alive_of,
    describe,
    gone,
    marker_pids,
    own_child,
    read_pidfile,
    start_background,
    tree_procs,
    wait_pidfile_async,
)

from tolaria.core.adapters.manifest import Manifest  # noqa: E402
from tolaria.core.events import Done, Event, Init  # noqa: E402
from tolaria.core.process import backend, linux_backend, proctree  # noqa: E402
from tolaria.core.process.registry import ProcessRegistry  # noqa: E402
from tolaria.core.stream_id import PREFIX, validate_stream_id  # noqa: E402
from tolaria.core.turns.runner import RunRequest, stream_ai_agent  # noqa: E402

#: Beyond the grace, how long the bench waits for a Tolaria stop before counting survivors.
VERIFY_EXTRA_S = 5.0
#: A tree killed from outside before the stop (another program's leak check) is re-spawned.
SPAWN_ATTEMPTS = 3


async def tolaria_stop(tree: Path, mode: str, grace: float, sid: str, tmp: Path,
                       cleanup: Cleanup, monitor: Monitor, stopper: CliAbort | None = None,
                       ) -> Stop:
    validate_stream_id(sid)
    pidfile = tmp / f"{sid}.pids"
    manifest = Manifest(id="bench-tree", name="bench tree", protocol="claude-stream-json",
                        command=(sys.executable, str(tree), mode, str(pidfile)))
    registry = ProcessRegistry()
    state: dict[str, Any] = {"init": None, "t_done": None, "done": None, "alive_at_done": [],
                             "stderr": []}
    procs: list[psutil.Process] = []

    def on_event(event: Event) -> None:
        if isinstance(event, Done):
            state["t_done"] = time.monotonic()
            state["done"] = event
            # Tolaria's promise: when done arrives the tree is gone. Check it right here.
            state["alive_at_done"] = alive_of(list(procs)) + [
                p for p in (cleanup.add_pid(pid) for pid in marker_pids(sid)) if p is not None
            ]
        elif isinstance(event, Init):
            state["init"] = event.session_id
        elif event.kind == "diagnostic":
            state["stderr"].append(getattr(event, "message", ""))

    task = asyncio.ensure_future(stream_ai_agent(RunRequest(manifest, prompt="x"), sid, on_event,
                                                 registry=registry, grace_s=grace))
    try:
        try:
            pids = await wait_pidfile_async(pidfile, task)
        except TreeNotUp as exc:
            raise TreeNotUp(f"{exc}; stderr: {state['stderr'][-5:]}") from None
        found, roles = tree_procs(pids, cleanup, sid)
        procs.extend(found)
        cleanup.owned.add(pids["agent"])  # asyncio waits for the agent; never reap it here
        tree_size = len(procs)

        if stopper is None:
            monitor.watch(sid, procs, grace + VERIFY_EXTRA_S)
        t0 = time.monotonic()
        if stopper is not None:  # from another process (bench/cli_abort.py)
            await stopper(registry, sid, lambda: monitor.watch(sid, procs, grace + VERIFY_EXTRA_S))
        elif not registry.abort(sid):
            raise RuntimeError("registry.abort returned False on a live run")
        done = await asyncio.wait_for(asyncio.shield(task), timeout=grace + VERIFY_EXTRA_S + 10)
        seen = monitor.result()  # the run is over: blocking the loop here delays nothing
        t_gone = seen["t"] if seen["t"] is not None else time.monotonic()
        # Survivors: alive when done arrived, or still alive when the monitor gave up waiting.
        for pid in seen["alive"]:
            proc = cleanup.add_pid(pid)
            if proc is not None and proc not in procs:
                procs.append(proc)
        left = {p.pid: p for p in alive_of(procs) + list(state["alive_at_done"])}
        survivors = [describe(p, roles) for _, p in sorted(left.items())]
        latency = (t_gone - t0) * 1000
        return Stop(
            latency_ms=latency,
            done_ms=(state["t_done"] - t0) * 1000 if state["t_done"] else None,
            survivors=survivors,
            tree_size=tree_size,
            stop_reason=done.stop_reason,
            reported_survivors=len(done.survivors),
            init_session=state["init"],
        )
    finally:
        if not task.done():
            registry.abort(sid)
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, timeout=grace + 5)
        if not task.done():
            task.cancel()
        # SIGKILL whatever is left (also a tree that never got listed); the agent is asyncio's
        # child, so it is never reaped here.
        cleanup.kill(procs + [p for p in (cleanup.add_pid(x) for x in marker_pids(sid)) if p])
        with contextlib.suppress(OSError):
            pidfile.unlink()


def baseline_stop(tree: Path, mode: str, wait: float, sid: str, tmp: Path,
                  cleanup: Cleanup) -> Stop:
    """Naive stop: SIGKILL the direct child only, then see what is left after ``wait`` s."""
    pidfile = tmp / f"{sid}.pids"
    env = dict(os.environ)
    env[MARKER] = sid  # only so the bench can find the tree the same way; changes nothing else
    child = subprocess.Popen([sys.executable, str(tree), mode, str(pidfile)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, start_new_session=True)
    cleanup.owned.add(child.pid)
    own_child(child.pid)
    root = cleanup.add_pid(child.pid)
    procs: list[psutil.Process] = [root] if root is not None else []
    try:
        deadline = time.monotonic() + SPAWN_TIMEOUT_S
        while not pidfile.exists():
            if child.poll() is not None:
                err = child.stderr.read().decode()[-500:] if child.stderr else ""
                raise TreeNotUp(f"tree exited early (returncode {child.returncode}): {err}")
            if time.monotonic() > deadline:
                raise TreeNotUp(f"the tree did not write {pidfile} within {SPAWN_TIMEOUT_S} s")
            time.sleep(POLL_S)
        pids = read_pidfile(pidfile)
        assert pids is not None
        found, roles = tree_procs(pids, cleanup, sid)
        procs = found
        tree_size = len(procs)
        agent = procs[0]

        t0 = time.monotonic()
        child.kill()  # SIGKILL to the registered child, nothing else
        while not gone(agent) and time.monotonic() < t0 + SPAWN_TIMEOUT_S:
            time.sleep(POLL_S)
        t_child = time.monotonic()
        # Wait up to ``wait`` s for the rest to go on its own (it will not: nobody signals it).
        deadline = t0 + wait
        while time.monotonic() < deadline and not all(gone(p) for p in procs):
            time.sleep(POLL_S)
        left = alive_of(procs)
        for pid in marker_pids(sid):
            if pid not in {p.pid for p in procs}:
                proc = cleanup.add_pid(pid)
                if proc is not None:
                    procs.append(proc)
                    left.append(proc)
        return Stop(latency_ms=(t_child - t0) * 1000,
                    survivors=[describe(p, roles) for p in left], tree_size=tree_size)
    finally:
        # Clean up the leftovers ourselves: the survivors' groups and pids, then reap.
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        cleanup.kill(procs + [p for p in (cleanup.add_pid(x) for x in marker_pids(sid)) if p])
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
        with contextlib.suppress(OSError):
            pidfile.unlink()


# -- series ----------------------------------------------------------------------------------
async def run_series(method: str, tree: Path, mode: str, args: argparse.Namespace, tmp: Path,
                     cleanup: Cleanup, tag: str, monitor: Monitor) -> Series:
    series = Series(mode, method, warmup=args.warmup)
    stops = args.baseline_stops if method == "baseline" else args.stops
    cli = CliAbort(tmp / "home") if method == "abort-cli" else None
    if cli is not None:
        await cli.start()
    try:
        await _stops(series, stops, tree, mode, args, tmp, cleanup, tag, monitor, cli)
    finally:
        if cli is not None:
            await cli.close()
            series.cli_exit_ms = cli.exit_ms[args.warmup:]
    return series


async def _stops(series: Series, stops: int, tree: Path, mode: str, args: argparse.Namespace,
                 tmp: Path, cleanup: Cleanup, tag: str, monitor: Monitor,
                 cli: CliAbort | None) -> None:
    method = series.method
    for i in range(args.warmup + stops):
        for attempt in range(SPAWN_ATTEMPTS):
            sid = f"{tag}-{method[:4]}-{mode}-{i:03d}-{attempt}"
            try:
                if method != "baseline":
                    stop = await tolaria_stop(tree, mode, args.grace, sid, tmp, cleanup, monitor,
                                              cli)
                else:  # synchronous on purpose: nothing else runs on the loop meanwhile
                    stop = baseline_stop(tree, mode, args.baseline_wait, sid, tmp, cleanup)
                break
            except TreeNotUp as exc:
                series.retries.append(str(exc))
                if attempt + 1 == SPAWN_ATTEMPTS:
                    raise
        if i >= args.warmup:
            series.stops.append(stop)
        progress(series, i, args.warmup + stops, args.quiet)


def run_busy_row(tree: Path, args: argparse.Namespace, tmp: Path, cleanup: Cleanup, tag: str,
                 monitor: Monitor, env: dict[str, str], subreaper: bool = True) -> Series:
    """The obey tree stopped while ``--busy`` unrelated idle processes exist (issue 16).

    They must not be our children (a desktop's processes are not Tolaria's): the subreaper
    flag is dropped while the shell that starts them exits, so they go to init.
    """
    _set_subreaper(False)
    try:
        background = start_background(args.busy, env)
    finally:
        _set_subreaper(subreaper)
    try:
        args.procs_busy = sum(1 for e in os.scandir("/proc") if e.name.isdigit())
        series = asyncio.run(run_series("tolaria", tree, "obey", args, tmp, cleanup, tag, monitor))
    finally:
        cleanup.kill(background)
    series.tree = "busy"
    return series


def run_backend(name: str, tree: Path, args: argparse.Namespace, tmp: Path, cleanup: Cleanup,
                tag: str, monitor: Monitor, env: dict[str, str]) -> list[Series]:
    """Every row with the ``name`` process backend (forced as TOLARIA_PROCESS_BACKEND here and
    in ``tolaria abort``). The baseline does not depend on it: only with the first backend."""
    os.environ[backend.ENV_VAR] = name
    linux_backend.set_subreaper(name == "linux")  # portable: nothing of the subreaper helps
    out = []
    for mode in args.trees:
        if mode == "busy":
            out.append(run_busy_row(tree, args, tmp, cleanup, f"{tag}-{name[0]}", monitor, env,
                                    subreaper=name == "linux"))
        else:
            for method in args.methods:
                if method == "baseline" and name != args.backends[0]:
                    continue
                out.append(asyncio.run(run_series(method, tree, mode, args, tmp, cleanup,
                                                  f"{tag}-{name[0]}", monitor)))
    for series in out:
        series.backend = name if series.method != "baseline" else "-"
    return out


def _set_subreaper(on: bool) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(36, int(on), 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def progress(series: Series, i: int, total: int, quiet: bool) -> None:
    if not quiet and sys.stderr.isatty():
        print(f"\r  {series.tree:6} {series.method:8} {i + 1:3}/{total}", end="", file=sys.stderr,
              flush=True)
        if i + 1 == total:
            print(file=sys.stderr)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stops", type=int, default=50, help="measured Tolaria stops per tree (50)")
    ap.add_argument("--baseline-stops", type=int, default=None,
                    help="measured baseline stops per tree (default: same as --stops)")
    ap.add_argument("--grace", type=float, default=0.5,
                    help="Tolaria's SIGTERM -> SIGKILL grace in s (0.5; the app default is 2.0)")
    ap.add_argument("--baseline-wait", type=float, default=1.0,
                    help="s the baseline waits after its SIGKILL before counting survivors (1.0)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured stops first per series (1)")
    ap.add_argument("--trees", default="obey,ignore,busy",
                    help="comma list of obey, ignore, busy")
    ap.add_argument("--busy", type=int, default=400, metavar="N",
                    help="unrelated idle processes that exist during the busy row (400)")
    ap.add_argument("--background", type=int, default=0, metavar="N",
                    help="start N idle processes first, to imitate a desktop's process count (0)")
    ap.add_argument("--backends", default="linux,portable",
                    help="comma list of process backends Tolaria stops with (linux,portable)")
    ap.add_argument("--methods", default="tolaria,abort-cli,baseline",
                    help="comma list of tolaria (registry.abort in-process), abort-cli "
                         "(`tolaria abort ID` from a new process) and baseline")
    ap.add_argument("--startup-runs", type=int, default=21, metavar="N",
                    help="times `tolaria abort` / `tolaria streams` start-up is timed (21; 0: no)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args(argv)
    if args.baseline_stops is None:
        args.baseline_stops = args.stops
    if args.stops < 1 or args.baseline_stops < 1 or args.grace < 0 or args.warmup < 0 \
            or args.background < 0:
        ap.error("--stops/--baseline-stops must be >= 1, --grace/--warmup/--background >= 0")
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not args.methods or set(args.methods) - {"tolaria", "abort-cli", "baseline"}:
        ap.error("--methods takes tolaria, abort-cli and/or baseline")
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not args.backends or set(args.backends) - {"linux", "portable"}:
        ap.error("--backends takes linux and/or portable")
    args.trees = [t.strip() for t in args.trees.split(",") if t.strip()]
    if not args.trees or set(args.trees) - {"obey", "ignore", "busy"}:
        ap.error("--trees takes obey, ignore and/or busy")
    return args


def _sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("sleep") is None:
        print("needs a `sleep` program on PATH", file=sys.stderr)
        return 2
    started = time.monotonic()
    args.load_start = tuple(round(x, 2) for x in os.getloadavg())
    tag = f"{PREFIX}bench-{secrets.token_hex(3)}"
    cleanup = Cleanup(tag)
    signal.signal(signal.SIGTERM, _sigterm)
    tmp = Path(tempfile.mkdtemp(prefix="tolaria-bench-"))
    all_series: list[Series] = []
    monitor: Monitor | None = None
    quiet_env = {k: v for k, v in os.environ.items() if k != MARKER}
    try:
        for proc in start_background(args.background, quiet_env):
            cleanup.add_pid(proc.pid)
            cleanup.expected.add(proc.pid)
        # Tolaria makes its process a child subreaper on its first run; do it up front so both
        # methods run in the same conditions (orphans of either are re-parented to the bench).
        proctree.enable_child_subreaper()
        args.procs_on_system = sum(1 for e in os.scandir("/proc") if e.name.isdigit())
        tree = tmp / "tree.py"
        tree.write_text(TREE_SCRIPT % {"lifetime": TREE_LIFETIME_S})
        (tmp / "monitor.py").write_text(MONITOR_SCRIPT % {"poll": POLL_S})
        monitor = Monitor(tmp / "monitor.py", quiet_env)
        for name in args.backends:
            all_series += run_backend(name, tree, args, tmp, cleanup, tag, monitor, quiet_env)
        os.environ.pop(backend.ENV_VAR, None)  # the start-up rows choose their own
        linux_backend.set_subreaper(True)
    except KeyboardInterrupt:
        print("\ninterrupted; cleaning up", file=sys.stderr)
        return 130
    finally:
        if monitor is not None:
            monitor.close()
        leftovers = cleanup.final()
        if leftovers:
            print(f"cleanup killed {len(leftovers)} leftover process(es):", file=sys.stderr)
            for line in leftovers:
                print(f"  {line}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    ok = report(all_series, args, started)
    for s in all_series:
        if s.cli_exit_ms:
            print(f"  {s.tree}/abort-cli: `tolaria abort` process start to exit, median "
                  f"{statistics.median(s.cli_exit_ms):.1f} ms, p95 {p95(s.cli_exit_ms):.1f} ms")
    if args.startup_runs:
        with tempfile.TemporaryDirectory(prefix="tolaria-bench-home-") as home:
            print_startup(startup_times(args.startup_runs, Path(home)))
    if args.json:
        Path(args.json).write_text(json.dumps(as_json(all_series, args), indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
