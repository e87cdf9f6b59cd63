"""Resource limits: Tolaria's peak memory while an agent prints 1 GB. See docs/RELIABILITY.md.

    python bench/flood.py [--mb 1024]

Runs ``tolaria run --json --agent flood > /dev/null`` (the real CLI, a fresh process each) with a
``lines`` adapter whose agent writes ``--mb`` MiB to stdout as fast as it can, in three shapes:

- ``baseline``: one short line (the cost of Tolaria itself);
- ``lines``: 1 KiB lines (every line becomes a text event that Tolaria parses and prints);
- ``one-line``: a single line of ``--mb`` MiB and a final short line (dropped at the 16 MiB line
  cap of tolaria/core/linereader.py while it streams by, reported once as a diagnostic).

Tolaria's peak RSS is its kernel high-water mark (``VmHWM`` in /proc/PID/status), polled every
10 ms until it exits (the agent is a separate process and is not counted). Also reported: the
wall time, the throughput and the events Tolaria printed (counted on a pipe for the final rerun
of the one-line shape, to show what the user sees).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

AGENT = """\
import sys
mb, shape = int(sys.argv[1]), sys.argv[2]
out = sys.stdout.buffer
if shape == "baseline":
    out.write(b"hello\\n")
elif shape == "lines":
    block = (b"x" * 1023 + b"\\n") * 1024
    for _ in range(mb):
        out.write(block)
else:
    block = b"y" * 2**20
    for _ in range(mb):
        out.write(block)
    out.write(b"\\nthe end\\n")
out.flush()
"""


def _hwm_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def measure(home: Path, shape: str, mb: int, stdout: int | None = None) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    env.update(TOLARIA_HOME=str(home), PYTHONPATH=str(ROOT), FLOOD_SHAPE=shape)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--json", "--agent",
                             f"flood-{shape}", "go"], env=env, cwd=home,
                            stdout=stdout if stdout is not None else subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _hwm_kb(proc.pid) or 0)
        time.sleep(0.01)
    seconds = time.monotonic() - started
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    return {"shape": shape, "mb": mb if shape != "baseline" else 0, "exit": proc.returncode,
            "peak_rss_mb": round(peak / 1024, 1), "seconds": round(seconds, 1),
            "mb_per_s": round(mb / seconds, 1) if shape != "baseline" else None,
            "stderr": stderr[-300:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tolaria-flood-") as tmp:
        home = Path(tmp)
        (home / "adapters").mkdir()
        agent = home / "agent.py"
        agent.write_text(AGENT)
        for shape in ("baseline", "lines", "one-line"):
            (home / "adapters" / f"flood-{shape}.toml").write_text(
                f'id = "flood-{shape}"\nprotocol = "lines"\n'
                f'command = [{json.dumps(sys.executable)}, {json.dumps(str(agent))}, '
                f'"{args.mb}", "{shape}", "{{prompt}}"]\n')
        results = [measure(home, shape, args.mb) for shape in ("baseline", "lines", "one-line")]
        for r in results:
            print(json.dumps({k: v for k, v in r.items() if k != "stderr"}))
        # What the user sees for the one huge line (on a pipe, so the events can be read).
        with tempfile.TemporaryFile() as out:
            measure(home, "one-line", min(args.mb, 64), stdout=out.fileno())
            out.seek(0)
            events = [json.loads(line) for line in out.read().splitlines()]
        shown = [{k: v for k, v in e.items() if k != "stream_id"} for e in events]
        print("one-line events:", json.dumps(shown)[:600])
    base = float(results[0]["peak_rss_mb"])  # type: ignore[arg-type]
    worst = max(float(r["peak_rss_mb"]) for r in results)  # type: ignore[arg-type]
    ok = all(r["exit"] == 0 for r in results) and worst - base <= 64
    print(f"baseline {base} MB, worst {worst} MB (+{worst - base:.1f} MB): "
          f"{'PASS' if ok else 'FAIL'} (bound: +64 MB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
