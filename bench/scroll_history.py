"""Scrolling a long chat to its first turn and back: event-loop stalls and memory (issue 23, 5).

    QT_QPA_PLATFORM=offscreen python bench/scroll_history.py [--turns 5000] [--step-px 800]
        [--max-s 400] [--json]

A fresh ``TOLARIA_HOME`` gets one chat of ``--turns`` finished turns, written through the real
``Store`` (bench/restore_scale.py's ``fill``: a prompt, a markdown answer of ~9 KB and a shell
tool call with its output each). A child process opens the real window on it
(``tolaria.app.main.Tolaria``, offscreen, qasync loop) and measures the open as
bench/restore_scale.py does (first paint of the newest turn, idle, RSS 1 s after idle). Then it
scrolls from the bottom to the very first turn and back to the newest, ``--step-px`` pixels of
the transcript's scroll bar every 16 ms (a fast wheel; the view loads older or newer pages as an
end comes near, one turn built per frame), at most ``--max-s`` seconds each way. A 5 ms precise
timer (bench/ui_stream.py's ``TickRecorder``) measures the event loop's stalls all along (its
lateness); reported: p50, p95, p99 and the worst stall, the longest stalls, the RSS at the end
and its peak (sampled every 0.25 s), the turns reached, the most turn widgets held at once.
With them, ``cpu_ms``: the GUI thread's own CPU time between two ticks of the probe (same
percentiles). On a loaded machine a stall is also time spent waiting for a core; the CPU time
is what the process itself did in it, so runs of old and new code compare under load too.

Targets (issue 23, item 5, unchanged from issue 13): the open costs the same at any length; no
stall over ~100 ms; RSS <= 200 MB. Results: docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
FRAME_S = 0.016
_MARKER = re.compile(r"turn-(\d+)-marker")


def _shown(pane: Any) -> tuple[int | None, int | None]:
    """The numbers of the first and last turns the transcript holds (None: not known yet)."""
    views = pane.turn_views()
    numbers = []
    for view in (views[0], views[-1]) if views else ():
        found = _MARKER.search(view.text())
        numbers.append(int(found.group(1)) if found else None)
    return (numbers[0], numbers[1]) if numbers else (None, None)


def _cpu_recorder() -> Any:
    """bench/ui_stream.py's probe that also notes the GUI thread's CPU time between ticks."""
    from ui_stream import TickRecorder

    class CpuTicks(TickRecorder):  # type: ignore[misc]
        def start(self) -> None:
            self.cpu: list[float] = []
            self._cpu_last = time.thread_time()
            super().start()

        def _on_timer_timeout(self) -> None:
            now = time.thread_time()
            self.cpu.append((now - self._cpu_last) * 1000)
            self._cpu_last = now
            super()._on_timer_timeout()

    return CpuTicks()


def _spread(values: list[float]) -> dict[str, Any]:
    from ui_stream import percentile

    return {"ticks": len(values), "p50": round(percentile(values, 50), 1),
            "p95": round(percentile(values, 95), 1), "p99": round(percentile(values, 99), 1),
            "max": round(max(values, default=0.0), 1),
            "worst10": [round(x) for x in sorted(values)[-10:]],
            "over_50": sum(x > 50 for x in values), "over_100": sum(x > 100 for x in values)}


async def scroll(turns: int, step: int, max_s: float) -> dict[str, Any]:
    """(In the child.) Open the chat, scroll to the first turn and back, measured."""
    sys.path.insert(0, str(BENCH))
    from restore_scale import _rss_mb, open_chat
    from ui_stream import TICK_MS

    app, pane, result = await open_chat(turns)
    bar = pane.transcript.verticalScrollBar()
    recorder = _cpu_recorder()
    rss_peak = result["rss_mb"]
    most = 0
    recorder.start()

    async def go(up: bool) -> dict[str, Any]:
        nonlocal rss_peak, most
        began = sampled = time.perf_counter()
        first = last = None
        reached = False
        while time.perf_counter() - began < max_s:
            first, last = _shown(pane)
            most = max(most, len(pane.turn_views()))
            if up and first == 0 and bar.value() == 0:
                reached = True
                break
            if (not up and last == turns - 1 and bar.value() == bar.maximum()
                    and not pane.transcript.busy):
                reached = True
                break
            bar.setValue(max(0, bar.value() - step) if up
                         else min(bar.maximum(), bar.value() + step))
            if time.perf_counter() - sampled >= 0.25:
                rss_peak = max(rss_peak, _rss_mb())
                sampled = time.perf_counter()
            await asyncio.sleep(FRAME_S)
        return {"seconds": round(time.perf_counter() - began, 1), "reached": reached,
                "first_turn": first, "last_turn": last}

    result["up"] = await go(up=True)
    result["down"] = await go(up=False)
    recorder.stop()
    result["stall_ms"] = _spread([max(0.0, gap - TICK_MS) for gap in recorder.gaps])
    result["cpu_ms"] = _spread(recorder.cpu)
    result["most_widgets"] = most
    result["rss_end_mb"] = _rss_mb()
    result["rss_peak_mb"] = max(rss_peak, result["rss_end_mb"])
    app.window.close()
    await app.shutdown()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--text", type=int, default=9000, help="answer characters per turn")
    parser.add_argument("--step-px", type=int, default=800, help="scroll bar step per frame")
    parser.add_argument("--max-s", type=float, default=400.0, help="seconds at most each way")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from tolaria.app.main import make_qapplication
        from tolaria.qt import loop

        make_qapplication()
        print(json.dumps(loop.run(scroll(args.turns, args.step_px, args.max_s))))
        return 0
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tolaria-scroll-history-") as home:
        env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
        env.update(TOLARIA_HOME=home, HOME=home, PYTHONPATH=str(ROOT),
                   QT_QPA_PLATFORM="offscreen")
        filled = time.perf_counter()
        subprocess.run([sys.executable, str(BENCH / "restore_scale.py"), "--fill",
                        str(args.turns), "--text", str(args.text)], env=env, cwd=home, check=True)
        fill_s = time.perf_counter() - filled
        proc = subprocess.run([sys.executable, __file__, "--child", "--turns", str(args.turns),
                               "--step-px", str(args.step_px), "--max-s", str(args.max_s)],
                              env=env, cwd=home, capture_output=True, text=True, check=False)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(lines[-1])
        result["fill_s"] = round(fill_s, 1)
        result["db_mb"] = round(sum(p.stat().st_size for p in Path(home).rglob("*.sqlite3*"))
                                / 2**20, 1)
    result["machine"] = (f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
                         f"{platform.python_version()}, load {load:.2f} -> "
                         f"{os.getloadavg()[0]:.2f}")
    ok = (result["up"]["reached"] and result["down"]["reached"]
          and result["stall_ms"]["max"] <= 100 and result["rss_peak_mb"] <= 200)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(json.dumps(result))
        print("PASS" if ok else "FAIL", "(targets: to the first turn and back, no stall over "
              "100 ms, RSS <= 200 MB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
