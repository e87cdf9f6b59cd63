"""Resource limits through the window: a 1 GB flood into the real window and store.

    python bench/flood_window.py [--mb 1024] [--stop-after-mb 256] [--json]

Each scenario runs in a fresh child process (this script with ``--child``) that builds the app's
own composition root, ``tolaria.app.main.Tolaria`` (offscreen, qasync loop, real ``Store`` in a fresh
``TOLARIA_HOME``, real runner and registry), and sends a prompt to a ``lines`` agent that prints
1 KiB lines (each one a text delta) as fast as it can:

- ``complete``: ``--mb`` MiB, then ``the end``; the turn completes by itself;
- ``stop``: without end; Stop is clicked (the real button) once ``--stop-after-mb`` MiB arrived.

Measured in the child: the RSS of the Tolaria process (the agent is another process) before the
flood (after start and 1 s idle) and its peak during the flood (``VmHWM`` reset through
``/proc/self/clear_refs`` before Send, and ``VmRSS`` sampled every 10 ms); the event loop's
stalls (a 5 ms precise QTimer, lateness = gap - 5 ms, from Send until everything is drawn); the
time from the Stop click until the run is over (``run_finished``: its tree gone) and until no
process of the run is left (a /proc scan); the characters of text stored and the database's size
on disk (file + WAL) after ``Store.close``; the time and extra peak RSS of reading the turn's
events back from a reopened store (what opening the conversation again reads).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

AGENT = """\
import sys
mb = int(sys.argv[1])
out = sys.stdout.buffer
block = b"".join(b"%06d " % i + b"x" * 1016 + b"\\n" for i in range(1024))  # 1 MiB, 1 KiB lines
sent = 0
while mb == 0 or sent < mb:
    out.write(block)
    sent += 1
out.write(b"the end\\n")
out.flush()
"""


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class RssSampler:
    """The highest VmRSS seen, sampled every 10 ms on a thread."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak_kb = max(self.peak_kb, _status_kb("VmRSS"))


async def child(scenario: str, mb: int, stop_after_mb: int, home: Path) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT / "bench"))
    from helpers import marker_pids  # tests/helpers.py
    from ui_stream import TickRecorder  # bench/ui_stream.py

    from tolaria.app.main import Tolaria
    from tolaria.core.adapters.manifest import Manifest
    from tolaria.core.events import TextDelta
    from tolaria.core.output_cap import OutputLimits

    agent = home / "agent.py"
    agent.write_text(AGENT)
    app = Tolaria()
    await app.start()
    manifest = Manifest(id="flood", name="Flood", protocol="lines",
                        command=(sys.executable, str(agent), str(mb if scenario == "complete"
                                                                 else 0), "{prompt}"))
    app.adapters.manifests[manifest.id] = manifest
    app.window.set_manifests(list(app.adapters.manifests.values()))
    pane = app.window.current_pane()
    assert pane is not None
    app.controller.set_agent(pane.conversation_id, manifest.id)
    app.window.resize(1100, 720)
    await asyncio.sleep(1.0)
    gc.collect()
    baseline_kb = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    recorder = TickRecorder()
    result: dict[str, Any] = {"scenario": scenario, "limits": OutputLimits.from_env().__dict__}
    with RssSampler() as sampler:
        recorder.start()
        started = time.perf_counter()
        pane.composer.setPlainText("flood")
        pane.button.click()
        stream_id = pane.running_stream
        assert stream_id is not None
        turn = pane.turn_views()[-1]
        if scenario == "stop":
            while turn.received_chars < stop_after_mb * 2**20:  # noqa: ASYNC110 (UI polling)
                await asyncio.sleep(0.01)
            clicked = time.perf_counter()
            result["received_at_stop_mb"] = round(turn.received_chars / 2**20, 1)
            pane.button.click()  # Stop
            while pane.running_stream is not None:  # noqa: ASYNC110
                await asyncio.sleep(0.001)
            result["stop_to_finished_ms"] = round((time.perf_counter() - clicked) * 1000, 1)
            left = marker_pids(stream_id)
            result["stop_to_no_process_ms"] = round((time.perf_counter() - clicked) * 1000, 1)
            result["processes_left"] = len(left)
        else:
            while pane.running_stream is not None:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        streamed = time.perf_counter() - started
        while pane.transcript.busy:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        result["until_drawn_s"] = round(time.perf_counter() - started, 1)
        stall = recorder.stop()
    result.update(
        status=turn.status, received_mb=round(turn.received_chars / 2**20, 1),
        stream_s=round(streamed, 1), mb_per_s=round(turn.received_chars / 2**20 / streamed, 1),
        baseline_rss_mb=round(baseline_kb / 1024, 1),
        peak_rss_mb=round(max(sampler.peak_kb, _status_kb("VmHWM")) / 1024, 1),
        stall=stall, notices=turn.cap_notices(), shown_chars=len(turn.text()))
    result["peak_over_baseline_mb"] = round(result["peak_rss_mb"] - result["baseline_rss_mb"], 1)
    stored = app.store.turn_by_stream(stream_id)
    assert stored is not None
    events = app.store.events(stored.id)
    result["stored_text_chars"] = sum(len(e.text) for e in events if isinstance(e, TextDelta))
    result["stored_events"] = len(events)
    app.window.close()
    await app.shutdown()  # closes the store: the WAL is checkpointed into the file
    result["db_bytes"] = sum(p.stat().st_size for p in app.store.path.parent.glob(
        app.store.path.name + "*"))
    # What opening the conversation again reads: the capped turn's events from the file.
    from tolaria.core.store.db import Store

    gc.collect()
    before_kb = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    began = time.perf_counter()
    reopened = Store(app.store.path)
    restored = reopened.events(stored.id)
    result["restore_events_ms"] = round((time.perf_counter() - began) * 1000, 1)
    result["restore_peak_rss_mb"] = round((_status_kb("VmHWM") - before_kb) / 1024, 1)
    result["restored_notices"] = sum(1 for e in restored if getattr(e, "source", "") == "cap")
    reopened.close()
    return result


def run_child(scenario: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tolaria-flood-window-") as home:
        env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
        env.update(TOLARIA_HOME=home, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
        proc = subprocess.run(
            [sys.executable, __file__, "--child", scenario, "--mb", str(args.mb),
             "--stop-after-mb", str(args.stop_after_mb), "--home", home],
            env=env, cwd=home, capture_output=True, text=True, check=False)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"{scenario} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        data: dict[str, Any] = json.loads(lines[-1])
        return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="MiB printed by `complete`")
    parser.add_argument("--stop-after-mb", type=int, default=256,
                        help="MiB received before Stop is clicked in `stop`")
    parser.add_argument("--scenarios", default="complete,stop")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from tolaria.app.main import make_qapplication
        from tolaria.qt import loop

        make_qapplication()
        data = loop.run(child(args.child, args.mb, args.stop_after_mb, Path(args.home)))
        print(json.dumps(data))
        return 0
    machine = (f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
               f"{platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    results = [run_child(s, args) for s in args.scenarios.split(",")]
    if args.json:
        print(json.dumps({"machine": machine, "results": results}, indent=2))
    else:
        print(f"machine: {machine}")
        for r in results:
            print(json.dumps(r))
    cap = results[0]["limits"]["turn_chars"] + results[0]["limits"]["tail_chars"]
    ok = all(r["peak_over_baseline_mb"] <= 128 and r["stored_text_chars"] <= cap
             and r.get("processes_left", 0) == 0 for r in results)
    print("PASS" if ok else "FAIL", "(bounds: peak RSS +128 MB over baseline, stored text <= "
          "cap + tail, no process left)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
