"""Crash durability of the store: SIGKILL the window's process mid-stream. See docs/RELIABILITY.md.

    python bench/crash_store.py [--kills 10]

Each round starts the app's own composition root (``tolaria.app.main.Tolaria``, offscreen, qasync,
the real ``Store`` under a temporary ``TOLARIA_HOME``) and sends a prompt (``controller.send``,
what the Send button does) to a ``lines`` agent that prints ``tick N <unix time>`` every 2 ms.
After a random 0.5-1.5 s the app is SIGKILLed. Then: ``PRAGMA integrity_check``; the turn
reopened with ``Store()`` must read ``interrupted``; the **loss window** is the kill time minus
the timestamp of the last tick the store kept (it includes the pipe, the Qt bridge and the
store's 50 ms flush interval); and no process of the run may be alive 2 s after the kill
(tolaria.core.process.watchdog).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from helpers import marker_pids  # noqa: E402  (the tests' independent /proc scan)

from tolaria.core.events import TextDelta  # noqa: E402
from tolaria.core.store.db import Store  # noqa: E402

TICKER = """\
import sys, time
i = 0
while True:
    i += 1
    sys.stdout.write(f"tick {i} {time.time():.6f}\\n")
    sys.stdout.flush()
    time.sleep(0.002)
"""

APP = """\
import asyncio, sys
from tolaria.app.main import Tolaria, make_qapplication
from tolaria.qt import loop

async def main() -> None:
    app = Tolaria(agent="ticker", cwd=sys.argv[1])
    await app.start()
    conversation = app.controller.conversations()[0]
    print(app.controller.send(conversation.id, "tick"), flush=True)
    await asyncio.sleep(3600)

make_qapplication()
loop.run(main())
"""


def one_kill(rng: random.Random) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="tolaria-crash-") as tmp:
        home = Path(tmp)
        (home / "adapters").mkdir()
        (home / "ticker.py").write_text(TICKER)
        (home / "adapters" / "ticker.toml").write_text(
            f'id = "ticker"\nprotocol = "lines"\ncommand = [{json.dumps(sys.executable)}, '
            f'{json.dumps(str(home / "ticker.py"))}, "{{prompt}}"]\n')
        env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
        env.update(TOLARIA_HOME=str(home), PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
        app = subprocess.Popen([sys.executable, "-c", APP, str(home)], env=env, cwd=home,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            assert app.stdout is not None
            sid = app.stdout.readline().decode().strip()
            deadline = time.monotonic() + 30
            while not marker_pids(sid):
                assert time.monotonic() < deadline, "the ticker never started"
                time.sleep(0.01)
            time.sleep(rng.uniform(0.5, 1.5))
            killed_at, killed = time.time(), time.monotonic()
            app.send_signal(signal.SIGKILL)
            app.wait(10)
            while marker_pids(sid) and time.monotonic() - killed < 2.0:
                time.sleep(0.005)
            tree_gone_ms = (time.monotonic() - killed) * 1000
            survivors = marker_pids(sid)
        finally:
            if app.poll() is None:
                app.kill()
                app.wait(10)
        db = next(home.rglob("tolaria.sqlite3"))
        with sqlite3.connect(db) as conn:
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        store = Store(db)
        try:
            turn = store.turn_by_stream(sid)
            assert turn is not None
            text = "".join(e.text for e in store.events(turn.id) if isinstance(e, TextDelta))
            status = turn.status
        finally:
            store.close()
        ticks = [line.split() for line in text.splitlines() if line.startswith("tick ")]
        complete = [t for t in ticks if len(t) == 3]
        last = float(complete[-1][2]) if complete else float("nan")
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        return {"integrity": integrity, "status": status, "ticks_kept": len(complete),
                "loss_ms": round((killed_at - last) * 1000, 1),
                "tree_gone_ms": round(tree_gone_ms, 1), "survivors": len(survivors)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results = []
    for _ in range(args.kills):
        result = one_kill(rng)
        print(json.dumps(result), flush=True)
        results.append(result)
    losses = sorted(float(r["loss_ms"]) for r in results)  # type: ignore[arg-type]
    gone = sorted(float(r["tree_gone_ms"]) for r in results)  # type: ignore[arg-type]
    ok = all(r["integrity"] == "ok" and r["status"] == "interrupted" and r["survivors"] == 0
             and r["ticks_kept"] for r in results)
    print(f"loss window ms: median {statistics.median(losses):.1f}, max {losses[-1]:.1f}; "
          f"tree gone ms: median {statistics.median(gone):.1f}, max {gone[-1]:.1f}; "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
