"""Opening a long chat: the real window on stores of 10 to 5,000 turns.

    python bench/restore_scale.py [--sizes 10,200,1000,5000] [--text 9000] [--scroll-s 30] [--json]

For each size, a fresh ``TOLARIA_HOME`` gets one conversation of that many finished turns (~9 KB
of markdown answer text and one shell tool call each, written through the real ``Store``; see
``fill_chat`` in tests/helpers.py). Then a child process builds the app's composition root,
``tolaria.app.main.Tolaria`` (offscreen, qasync loop), which opens the newest chat at start, and
measures, from just before ``Tolaria()``:

- ``first_paint_ms``: until the newest turn is fully applied (its ending shown) and the window
  has been painted with it (a synchronous ``repaint``);
- ``idle_ms``: until the transcript has nothing left to render and stays so for 300 ms (the time
  reported is when it became idle);
- ``rss_mb``: the process's RSS 1 s after idle (after ``gc.collect()``);
- scrolling from the bottom towards the top, 400 px every 16 ms (as a fast wheel does), for at
  most ``--scroll-s`` seconds: the event loop's stalls (lateness of a 5 ms precise timer, p99 and
  worst) and how many turns were scrolled through, plus the most turn widgets held at once.

Targets (issue 13): first paint <= 500 ms and idle <= 1 s at every size; RSS <= 200 MB at
5,000 turns. Results and the machine they ran on: docs/PERFORMANCE.md.
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
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def fill(turns: int, text_chars: int) -> None:
    """(In a child whose TOLARIA_HOME is the fresh home.) Write the chat."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import fill_chat  # tests/helpers.py

    from tolaria.core.store.db import Store

    store = Store()
    try:
        conversation = store.create_conversation(f"{turns} turns", "demo", str(Path.home()))
        fill_chat(store, conversation.id, turns, text_chars=text_chars)
    finally:
        store.close()


async def open_chat(turns: int) -> tuple[Any, Any, dict[str, Any]]:
    """(In the child.) The real app opened on the home's chat of ``turns`` turns, measured until
    it is idle: the app, the chat's pane, and first paint, idle, widgets at idle and RSS (1 s
    after idle). Also used by bench/scroll_history.py."""
    from tolaria.app.main import Tolaria

    started = time.perf_counter()
    app = Tolaria()
    await app.start()
    app.window.resize(1100, 760)
    pane = app.window.current_pane()
    assert pane is not None
    newest = f"turn-{turns - 1}-marker"
    result: dict[str, Any] = {"turns": turns}
    while True:
        views = pane.turn_views()
        if views and views[-1].ending is not None:
            break
        await asyncio.sleep(0.001)
    app.window.repaint()
    result["first_paint_ms"] = round((time.perf_counter() - started) * 1000)
    assert newest in pane.turn_views()[-1].text(), "the newest turn is the one shown"
    idle_at = None
    while True:
        if pane.transcript.busy:
            idle_at = None
        elif idle_at is None:
            idle_at = time.perf_counter()
        elif time.perf_counter() - idle_at >= 0.3:
            break
        await asyncio.sleep(0.005)
    result["idle_ms"] = round((idle_at - started) * 1000)
    result["widgets_at_idle"] = len(pane.turn_views())
    await asyncio.sleep(1.0)
    gc.collect()
    result["rss_mb"] = _rss_mb()
    return app, pane, result


async def measure(turns: int, scroll_s: float) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "bench"))
    from ui_stream import TickRecorder  # bench/ui_stream.py

    app, pane, result = await open_chat(turns)
    bar = pane.transcript.verticalScrollBar()
    recorder = TickRecorder()
    recorder.start()
    began = time.perf_counter()
    most = 0
    oldest_seen = turns
    while time.perf_counter() - began < scroll_s:
        views = pane.turn_views()
        most = max(most, len(views))
        first = views[0].text() if views else ""
        marker = first.find("turn-")
        if marker >= 0:
            oldest_seen = min(oldest_seen, int(first[marker + 5:].split("-", 1)[0]))
        if oldest_seen == 0 and bar.value() == 0:
            break
        bar.setValue(max(0, bar.value() - 400))
        await asyncio.sleep(0.016)
    result["scroll"] = recorder.stop()
    result["scroll_s"] = round(time.perf_counter() - began, 1)
    result["scrolled_turns"] = turns - oldest_seen
    result["most_widgets"] = most
    result["rss_after_scroll_mb"] = _rss_mb()
    app.window.close()
    await app.shutdown()
    return result


def run_size(turns: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tolaria-restore-scale-") as home:
        env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
        env.update(TOLARIA_HOME=home, HOME=home, PYTHONPATH=str(ROOT),
                   QT_QPA_PLATFORM="offscreen")
        filled = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--fill", str(turns), "--text", str(args.text)],
                       env=env, cwd=home, check=True)
        fill_s = time.perf_counter() - filled
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(turns), "--scroll-s", str(args.scroll_s)],
            env=env, cwd=home, capture_output=True, text=True, check=False)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"{turns} turns failed (exit {proc.returncode}): "
                               f"{proc.stderr[-2000:]}")
        data: dict[str, Any] = json.loads(lines[-1])
        data["fill_s"] = round(fill_s, 1)
        data["db_mb"] = round(sum(p.stat().st_size for p in Path(home).rglob("*.sqlite3*"))
                              / 2**20, 1)
        return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,200,1000,5000")
    parser.add_argument("--text", type=int, default=9000, help="answer characters per turn")
    parser.add_argument("--scroll-s", type=float, default=30.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fill", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        fill(args.fill, args.text)
        return 0
    if args.child:
        from tolaria.app.main import make_qapplication
        from tolaria.qt import loop

        make_qapplication()
        print(json.dumps(loop.run(measure(args.child, args.scroll_s))))
        return 0
    machine = (f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
               f"{platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        results.append(run_size(size, args))
        if not args.json:
            print(json.dumps(results[-1]), flush=True)
    if args.json:
        print(json.dumps({"machine": machine, "results": results}, indent=2))
    else:
        print(f"machine: {machine}")
    ok = all(r["first_paint_ms"] <= 500 and r["idle_ms"] <= 1000 for r in results) and all(
        r["rss_mb"] <= 200 for r in results if r["turns"] >= 5000)
    print("PASS" if ok else "FAIL", "(targets: first paint <= 500 ms, idle <= 1 s, RSS <= 200 MB "
          "at 5,000 turns)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
