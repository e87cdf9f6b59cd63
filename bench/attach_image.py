"""Attaching a 20 MB image: time to chip and memory (issue 26).

    python bench/attach_image.py [--mb 20] [--repeat 5] [--json]

A fresh ``TOLARIA_HOME`` and a real PNG of ~``--mb`` MB (random pixels, so it does not
compress). Each measurement runs in its own child process (so its peak memory is its own):

- ``floor``: read the file and hash it (SHA-256): what any attach must at least do;
- ``attach``: what the window's worker thread does between the drop and the chip
  (tolaria/qt/attach_control.py): check (sniff, caps, one bounded read into one buffer), store
  the private content-addressed copy (write, fsync, rename): the chip is ready then (time to
  chip); then the thumbnail is decoded and shown on it;
- ``attach-again``: the same file once more (its copy is found: no second write).

Reported: the median wall time of each (and of its steps), the ratio attach / floor, and each
child's peak RSS growth over its own start (sampled every 2 ms) against the file size. The GUI thread does none of
this (it only adds the chip), so the window never waits for it. Results: docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

_CHILD = r"""
import hashlib, json, os, sys, time
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
mode, path = sys.argv[1], sys.argv[2]
from PySide6.QtGui import QGuiApplication
app = QGuiApplication([])
from tolaria.chats.attachments import AttachmentDesk
from tolaria.qt.attach_control import thumbnail_of
import threading
import psutil
desk = AttachmentDesk(None)
me = psutil.Process()
before = me.memory_info().rss
peak = [before]
done = threading.Event()

def sample():
    while not done.wait(0.002):
        peak[0] = max(peak[0], me.memory_info().rss)

sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
steps = {}
started = time.perf_counter()
if mode == "floor":
    with open(path, "rb") as fh:
        hashlib.sha256(fh.read()).hexdigest()
else:
    attachment = desk.attach(path)
    steps["check_and_store"] = time.perf_counter() - started
    thumb = thumbnail_of(str(desk.blobs.path(attachment.sha256)))
    assert thumb is not None and not thumb.isNull()
    steps["thumbnail"] = time.perf_counter() - started - steps["check_and_store"]
took = time.perf_counter() - started
done.set()
sampler.join()
print(json.dumps({"seconds": took, "rss_growth_kb": (peak[0] - before) // 1024,
                  "steps": steps}))
"""


def _png(path: Path, mb: float) -> int:
    from attachfiles import png_bytes

    side = int((mb * 1024 * 1024 / 3) ** 0.5)
    data = png_bytes(width=side, height=side, noise=True)
    path.write_bytes(data)
    return len(data)


def _child(mode: str, path: Path, home: Path) -> dict[str, Any]:
    env = {**os.environ, "TOLARIA_HOME": str(home),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path)], env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        image = Path(tmp) / "big.png"
        size = _png(image, args.mb)
        runs: dict[str, list[dict[str, Any]]] = {"floor": [], "attach": [], "attach-again": []}
        for i in range(args.repeat):
            home = Path(tmp) / f"home{i}"
            runs["floor"].append(_child("floor", image, home))
            runs["attach"].append(_child("attach", image, home))
            runs["attach-again"].append(_child("attach", image, home))
    report: dict[str, Any] = {"file_bytes": size, "repeat": args.repeat,
                              "machine": f"{platform.machine()} {os.cpu_count()} cores, "
                                         f"Python {platform.python_version()}"}
    for mode, results in runs.items():
        report[mode] = {"median_s": statistics.median(r["seconds"] for r in results),
                        "steps_median_s": {k: statistics.median(r["steps"][k] for r in results)
                                           for k in results[0]["steps"]},
                        "peak_rss_growth_mb": max(r["rss_growth_kb"] for r in results) / 1024}
    report["attach_over_floor"] = report["attach"]["median_s"] / report["floor"]["median_s"]
    report["chip_over_floor"] = (report["attach"]["steps_median_s"]["check_and_store"]
                                 / report["floor"]["median_s"])
    report["attach_rss_over_file"] = (report["attach"]["peak_rss_growth_mb"] * 1024 * 1024
                                      / size)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"image: {size / 1024 / 1024:.1f} MB PNG, {args.repeat} runs, {report['machine']}")
    for mode in runs:
        r = report[mode]
        steps = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in r["steps_median_s"].items())
        print(f"  {mode:13s} median {r['median_s'] * 1000:7.1f} ms   peak RSS growth "
              f"{r['peak_rss_growth_mb']:6.1f} MB" + (f"   ({steps})" if steps else ""))
    print(f"  time to chip (check_and_store) / floor: {report['chip_over_floor']:.2f}x; "
          f"with the thumbnail: {report['attach_over_floor']:.2f}x; attach RSS growth / file "
          f"size: {report['attach_rss_over_file']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
