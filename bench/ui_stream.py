"""UI benchmarks: event-loop stalls while a flood streams into the real window; cold start.

    QT_QPA_PLATFORM=offscreen python bench/ui_stream.py [--mb 20] [--starts 5] [--json]

*Stall*: the real window (``tolaria.app.main.Tolaria``, real store, real runner, qasync loop) runs the
fake agent's ``flood`` mode (``FAKE_FLOOD_LINES`` lines of ~1 KB, each a separate text delta:
``--mb 20`` is ~20 MB). A 5 ms precise QTimer records the gap between its ticks from Send until
the run has finished and the transcript has applied everything; lateness = gap - 5 ms. Reported:
worst and p99 lateness, and an idle baseline measured the same way before the flood.

*Cold start*: a small wrapper (``python -c _FIRST_PAINT``, not ``python -m tolaria``) is started
``--starts`` times (fresh TOLARIA_HOME each time, so the first chat is created): it installs an
event filter that reports the first paint of the main window on stdout and closes the window (the
normal shutdown path), then runs ``tolaria.cli.main.main([])``, what the installed ``tolaria``
command runs with no arguments. Measured in this process, from just before the spawn to reading
that line: interpreter start, imports, store, window, first paint.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

FAKE_AGENT = ROOT / "tests" / "fakes" / "fake_agent.py"
TICK_MS = 5

# Runs in the child: report the first paint of the main window, then close it.
_FIRST_PAINT = """
import sys, time
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication
import tolaria.app.main as app_module

class FirstPaint(QObject):
    done = False
    def eventFilter(self, obj, event):
        if not self.done and event.type() == QEvent.Type.Paint:
            window = getattr(obj, "window", lambda: None)()
            if window is not None and window.objectName() == "mainWindow":
                self.done = True
                print("first-paint", flush=True)
                QTimer.singleShot(0, window.close)
        return False

original = app_module.make_qapplication
def patched(argv=None):
    qapp = original(argv)
    qapp._first_paint = FirstPaint()
    qapp.installEventFilter(qapp._first_paint)
    return qapp
app_module.make_qapplication = patched
from tolaria.cli.main import main
sys.exit(main([]))
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


class TickRecorder:
    """Gaps between ticks of a 5 ms precise timer: how late the event loop let it run."""

    def __init__(self) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._on_timer_timeout)
        self.gaps: list[float] = []
        self._last = 0.0

    def start(self) -> None:
        self.gaps.clear()
        self._last = time.perf_counter()
        self.timer.start()

    def stop(self) -> dict[str, float]:
        self.timer.stop()
        late = [max(0.0, gap - TICK_MS) for gap in self.gaps]
        return {
            "ticks": len(late),
            "worst_ms": round(max(late, default=0.0), 2),
            "p99_ms": round(percentile(late, 99), 2),
            "p50_ms": round(percentile(late, 50), 2),
        }

    def _on_timer_timeout(self) -> None:
        now = time.perf_counter()
        self.gaps.append((now - self._last) * 1000)
        self._last = now


async def measure_stall(megabytes: int) -> dict[str, Any]:
    from helpers import fake_manifest  # tests/helpers.py

    from tolaria.app.main import Tolaria
    from tolaria.ui.transcript import blocks

    app = Tolaria()
    await app.start()
    try:
        manifest = fake_manifest("flood")
        app.adapters.manifests[manifest.id] = manifest
        app.window.set_manifests(list(app.adapters.manifests.values()))
        pane = app.window.current_pane()
        assert pane is not None
        app.controller.set_agent(pane.conversation_id, manifest.id)
        app.window.resize(1100, 720)
        os.environ["FAKE_FLOOD_LINES"] = str(megabytes * 1000)
        renders = 0
        original = blocks.RichText.set_markdown

        def counting(self: blocks.RichText, text: str) -> None:
            nonlocal renders
            renders += 1
            original(self, text)

        blocks.RichText.set_markdown = counting  # type: ignore[method-assign]
        recorder = TickRecorder()
        recorder.start()
        await asyncio.sleep(2.0)
        idle = recorder.stop()

        recorder.start()
        started = time.perf_counter()
        pane.composer.setPlainText("flood")
        pane.button.click()
        while pane.running_stream is not None:  # noqa: ASYNC110 (polling the UI is the point)
            await asyncio.sleep(0.05)
        streamed = time.perf_counter() - started
        while pane.transcript.busy:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        drained = time.perf_counter() - started
        flood = recorder.stop()
        turn = pane.turn_views()[-1]
        return {
            "megabytes": round(turn.received_chars / 1e6, 1),
            "deltas": megabytes * 1000,
            "status": turn.status,
            "stream_s": round(streamed, 2),
            "until_drawn_s": round(drained, 2),
            "renders": renders,
            "idle": idle,
            "flood": flood,
        }
    finally:
        app.window.close()
        await app.shutdown()


def measure_cold_start(starts: int) -> dict[str, Any]:
    times = []
    for _ in range(starts):
        with tempfile.TemporaryDirectory(prefix="tolaria-bench-") as home:
            env = dict(os.environ, TOLARIA_HOME=home, PYTHONPATH=str(ROOT))
            began = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-c", _FIRST_PAINT], env=env, cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            elapsed = time.perf_counter() - began
            proc.wait(timeout=30)
            if line.strip() != "first-paint":
                raise RuntimeError(f"the window never painted (exit {proc.returncode})")
            times.append(elapsed * 1000)
    return {"starts": starts, "median_ms": round(statistics.median(times)),
            "worst_ms": round(max(times)), "all_ms": [round(t) for t in times]}


async def _stall_main(megabytes: int) -> dict[str, Any]:
    return await measure_stall(megabytes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=20, help="flood size in MB (default 20)")
    parser.add_argument("--starts", type=int, default=5, help="cold starts to time (default 5)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from tolaria.app.main import make_qapplication
    from tolaria.qt import loop

    with tempfile.TemporaryDirectory(prefix="tolaria-bench-") as home:
        os.environ["TOLARIA_HOME"] = home
        make_qapplication()
        stall = loop.run(_stall_main(args.mb))
    cold = measure_cold_start(args.starts)
    result = {
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
                   f"{platform.python_version()}, Qt platform {os.environ['QT_QPA_PLATFORM']}",
        "stall": stall,
        "cold_start": cold,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    s = stall
    print(f"machine: {result['machine']}")
    print(f"flood: {s['megabytes']} MB in {s['deltas']} deltas, {s['status']}; streamed in "
          f"{s['stream_s']} s, drawn by {s['until_drawn_s']} s, {s['renders']} renders")
    print(f"5 ms timer lateness while flooding: p99 {s['flood']['p99_ms']} ms, worst "
          f"{s['flood']['worst_ms']} ms, median {s['flood']['p50_ms']} ms "
          f"({s['flood']['ticks']} ticks); idle: p99 {s['idle']['p99_ms']} ms, worst "
          f"{s['idle']['worst_ms']} ms")
    print(f"cold start to first paint: median {cold['median_ms']} ms, worst {cold['worst_ms']} ms "
          f"({cold['all_ms']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
