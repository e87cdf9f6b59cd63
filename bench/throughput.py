"""Streaming throughput of ``tolaria run`` against the raw floor, in one run (issue 23, item 3).

    python bench/throughput.py [--events 200000] [--reps 5] [--base DIR] [--json]

A flood of ``--events`` Claude stream-json lines (the shape of ``claude -p --output-format
stream-json --verbose --include-partial-messages``: the ``system/init`` line first, then
``message_start``, ``content_block_start``, text deltas, the complete ``assistant`` message,
``content_block_stop``, ``message_delta``, ``message_stop``, and the ``result`` line last; each
delta one to three words of markdown with a fresh ``uuid``, as Claude prints them) is written
to a file once. A tiny agent program copies that file to its stdout as fast as the pipe takes
it. Every row runs that same agent; one row is one fresh process, timed by wall clock from its
launch to its exit (start-up included: what a user waits for):

- ``raw``: the floor, a Python process that spawns the agent and ``json.loads`` every line of
  its stdout pipe (``for line in proc.stdout``), nothing else;
- ``text``: ``tolaria run --no-save --agent flood go``, stdout to a file (plain text mode);
- ``json``: ``tolaria run --no-save --json --agent flood go``, stdout to a file;
- ``saved``: ``tolaria run --agent flood go`` (plain text, and the turn stored in the store of a
  fresh ``TOLARIA_HOME``).

``flood`` is a custom adapter of the ``claude-stream-json`` protocol in that home's
``adapters/`` (the prompt as an argument, as the headless Claude dialect's CLI turn takes it).
Rows run interleaved (the order rotates every repetition), ``--reps`` times each; the medians
are reported as events per second (the agent's lines over the streaming time: from the agent's
start to the process's exit) and as a ratio to the raw floor of the same run, with the median of
each repetition's own ratio ("paired"), the ratio with start-up (wall) and of CPU time. With
``--base DIR`` the same rows run with another checkout's ``DIR/.venv/bin/python`` too
(``base-text``...), in the same interleaving.

With ``--instructions``, each row instead runs once under ``valgrind --tool=callgrind`` (the
process's own instructions, all its threads; the agent runs natively), on the flood and on a
20-line one: the difference over the difference in lines is the row's instructions per event,
start-up left out, and repeatable on a loaded machine where the times are not (hash seed
fixed). The ratio is the raw floor's instructions per event over the row's.

Every run is checked: the floor counted every line; the text output is exactly the deltas'
text plus the final newline; the JSON output has every text delta, in order, with the same
text; the store holds the turn, completed, with exactly that text.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSION = "368300af-edb8-49cf-91b7-e04250d25a47"
MESSAGE = "msg_flood_26897c1aa2984239"

AGENT = """\
import sys, time
with open(sys.argv[2], "w") as mark:  # when the stream starts (CLOCK_MONOTONIC is system-wide)
    mark.write(repr(time.monotonic()))
out = sys.stdout.buffer
with open(sys.argv[1], "rb") as fh:
    while True:
        block = fh.read(1 << 20)
        if not block:
            break
        out.write(block)
out.flush()
"""

FLOOR = """\
import json, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
lines = 0
for line in proc.stdout:
    json.loads(line)
    lines += 1
proc.wait()
print(lines)
"""

_WORDS = ("the", "store", "keeps", "every", "event", "of", "a", "turn", "and", "`tolaria`",
          "prints", "them", "as", "they", "come", "**stop**", "ends", "its", "whole",
          "process", "tree", "- item", "```python", "def", "run():", "return", "0", "```",
          "é", "→", "# Heading", "1.", "tests", "pass")


def _line(obj: dict[str, object]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


def _stream(event: dict[str, object]) -> str:
    return _line({"type": "stream_event", "event": event, "session_id": SESSION,
                  "parent_tool_use_id": None, "uuid": str(uuid.uuid4()),
                  "api_message_id": MESSAGE})


def make_flood(path: Path, events: int, seed: int = 23) -> str:
    """Write the flood to ``path``; returns the answer text (all the deltas)."""
    rng = random.Random(seed)
    deltas = events - 8  # init, message_start, block start/stop, assistant, delta, stop, result
    texts = []
    for i in range(deltas):
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))
        texts.append(words + ("\n" if i % 17 == 16 else " "))
    text = "".join(texts)
    usage = {"input_tokens": 10, "output_tokens": deltas}
    with path.open("w", encoding="utf-8") as out:
        out.write(_line({"type": "system", "subtype": "init", "cwd": "/home/user/project",
                         "session_id": SESSION, "tools": ["Bash", "Edit", "Read", "Write"],
                         "model": "claude-opus-5-5", "permissionMode": "default",
                         "uuid": str(uuid.uuid4())}))
        out.write(_stream({"type": "message_start", "message": {
            "id": MESSAGE, "type": "message", "role": "assistant", "model": "claude-opus-5-5",
            "content": [], "stop_reason": None, "usage": usage}}))
        out.write(_stream({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}}))
        for t in texts:
            out.write(_stream({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": t}}))
        out.write(_line({"type": "assistant", "message": {
            "id": MESSAGE, "type": "message", "role": "assistant", "model": "claude-opus-5-5",
            "content": [{"type": "text", "text": text}], "usage": usage},
            "parent_tool_use_id": None, "session_id": SESSION, "uuid": str(uuid.uuid4())}))
        out.write(_stream({"type": "content_block_stop", "index": 0}))
        out.write(_stream({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": usage}))
        out.write(_stream({"type": "message_stop"}))
        out.write(_line({"type": "result", "subtype": "success", "is_error": False,
                         "duration_ms": 1000, "num_turns": 1, "result": text[:100],
                         "session_id": SESSION, "total_cost_usd": 0.01, "usage": usage,
                         "terminal_reason": "completed", "uuid": str(uuid.uuid4())}))
    return text


class Bench:
    def __init__(self, work: Path, events: int) -> None:
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.events = events
        self.flood = work / "flood.jsonl"
        self.text = make_flood(self.flood, events)
        with self.flood.open("rb") as fh:
            self.lines = sum(1 for _ in fh)
        self.deltas = events - 8
        self.agent = work / "agent.py"
        self.agent.write_text(AGENT)
        self.floor = work / "floor.py"
        self.floor.write_text(FLOOR)
        self.runs = 0

    def home(self) -> Path:
        """A fresh TOLARIA_HOME with the ``flood`` adapter (and so a fresh store)."""
        self.runs += 1
        home = self.work / f"home-{self.runs}"
        (home / "adapters").mkdir(parents=True)
        (home / "adapters" / "flood.toml").write_text(
            'id = "flood"\nname = "Flood"\nprotocol = "claude-stream-json"\n'
            f'command = [{json.dumps(sys.executable)}, {json.dumps(str(self.agent))}, '
            f'{json.dumps(str(self.flood))}, {json.dumps(str(home / "started"))}, "{{prompt}}"]\n')
        return home

    def run(self, row: str, python: str, wrap: tuple[str, ...] = ()
            ) -> tuple[float, float, float]:
        """One run of ``row`` (``raw``, ``text``, ``json``, ``saved``), checked: seconds from
        its launch to its exit, seconds from the agent's start to its exit, CPU seconds (the
        process and the agent, user + system)."""
        home = self.home()
        out_path = home / "stdout"
        env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
        env.update(TOLARIA_HOME=str(home), NO_COLOR="1")
        if row == "raw":
            argv = [python, str(self.floor), sys.executable, str(self.agent), str(self.flood),
                    str(home / "started")]
        else:
            argv = [python, "-m", "tolaria", "run", "--agent", "flood"]
            argv += {"text": ["--no-save"], "json": ["--no-save", "--json"], "saved": []}[row]
            argv.append("go")
        argv = [*wrap, *argv]
        if wrap:
            env["PYTHONHASHSEED"] = "0"
        err_path = home / "stderr"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            launched = time.monotonic()
            proc = subprocess.Popen(argv, env=env, cwd=home, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL)
            # wait4: the CPU time of the process and of the children it waited for (the agent)
            _, status, usage = os.wait4(proc.pid, 0)
            ended = time.monotonic()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{row}: exit {code}: {err_path.read_text()[-800:]}")
        streaming = float((home / "started").read_text())
        self.check(row, out_path.read_bytes(), home)
        shutil.rmtree(home)
        return ended - launched, ended - streaming, usage.ru_utime + usage.ru_stime

    def check(self, row: str, out: bytes, home: Path) -> None:
        if row == "raw":
            if int(out) != self.lines:
                raise SystemExit(f"raw: {int(out)} lines parsed, expected {self.lines}")
            return
        if row in ("text", "saved") and out.decode() != self.text + "\n":
            raise SystemExit(f"{row}: the printed text differs ({len(out)} bytes)")
        if row == "json":
            events = [json.loads(line) for line in out.splitlines()]
            deltas = [e["text"] for e in events if e["kind"] == "text_delta"]
            kinds = [e["kind"] for e in events]
            if len(deltas) != self.deltas or "".join(deltas) != self.text:
                raise SystemExit(f"json: {len(deltas)} text deltas, expected {self.deltas}")
            if kinds[0] != "init" or kinds[-2:] != ["usage", "done"]:
                raise SystemExit(f"json: unexpected kinds {kinds[:2]}...{kinds[-3:]}")
        if row == "saved":
            db = next(home.rglob("tolaria.sqlite3"))
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                (status,) = conn.execute("SELECT status FROM turns").fetchone()
                rows = conn.execute("SELECT kind, payload FROM events ORDER BY seq").fetchall()
            finally:
                conn.close()
            text = "".join(json.loads(p)["text"] for k, p in rows if k == "text_delta")
            if status != "completed" or text != self.text:
                raise SystemExit(f"saved: turn {status}, {len(text)} of {len(self.text)} "
                                 "characters stored")


def callgrind_instructions(bench: Bench, row: str, python: str) -> int:
    """The instructions ``row`` executes on ``bench``'s flood (its own process, all threads)."""
    out = bench.work / f"callgrind.{bench.runs}"
    bench.run(row, python, ("valgrind", "--tool=callgrind", "--quiet",
                            f"--callgrind-out-file={out}"))
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            out.unlink()
            return int(line.split()[1])
    raise SystemExit(f"{row}: no instruction count in {out}")


def instructions(rows: list[tuple[str, str]], events: int, as_json: bool) -> int:
    """``--instructions``: each row's instructions per event, and the ratio to the floor's."""
    per_event: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tolaria-throughput-") as tmp:
        small = Bench(Path(tmp, "small"), 20)
        big = Bench(Path(tmp, "big"), events)
        for name, python in rows:
            counts = [callgrind_instructions(b, name.removeprefix("base-"), python)
                      for b in (small, big)]
            per_event[name] = (counts[1] - counts[0]) / (big.lines - small.lines)
            print(f"  {name:<11} {counts[0]:>14,} / {counts[1]:>14,} instructions: "
                  f"{per_event[name]:,.0f} per event", file=sys.stderr)
    floor = per_event.get("raw")
    result = {name: {"instructions_per_event": round(n),
                     "ratio": round(floor / n, 2) if floor else 1.0}
              for name, n in per_event.items()}
    if as_json:
        print(json.dumps({"events": events, "rows": result}))
        return 0
    print(f"{events} events vs 20 under callgrind: instructions per event, ratio to raw")
    for name, r in result.items():
        print(f"{name:<11} {r['instructions_per_event']:>10,} {r['ratio']:>6.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="lines of the flood")
    parser.add_argument("--reps", type=int, default=5, help="runs of each row (median)")
    parser.add_argument("--rows", default="raw,text,json,saved")
    parser.add_argument("--base", metavar="DIR",
                        help="also run the rows with DIR/.venv/bin/python (another checkout)")
    parser.add_argument("--json", action="store_true", help="results as one JSON object")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per event under callgrind instead of timing")
    args = parser.parse_args()
    rows = [(r, sys.executable) for r in args.rows.split(",")]
    if args.base:
        base_python = str(Path(args.base).resolve() / ".venv" / "bin" / "python")
        rows += [(f"base-{r}", base_python) for r in args.rows.split(",") if r != "raw"]
    if args.instructions:
        return instructions(rows, args.events, args.json)
    load_before = os.getloadavg()
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _ in rows}
    with tempfile.TemporaryDirectory(prefix="tolaria-throughput-") as tmp:
        bench = Bench(Path(tmp), args.events)
        mb = bench.flood.stat().st_size / 2**20
        print(f"flood: {bench.lines} lines, {mb:.1f} MB, {bench.deltas} text deltas, "
              f"{len(bench.text)} characters; load {load_before[0]:.2f}", file=sys.stderr)
        for rep in range(args.reps):
            order = rows[rep % len(rows):] + rows[:rep % len(rows)]
            for name, python in order:
                wall, stream, cpu = bench.run(name.removeprefix("base-"), python)
                times[name].append((wall, stream, cpu))
                print(f"  rep {rep + 1} {name:<11} {wall:6.3f} s, streaming {stream:6.3f} s: "
                      f"{bench.lines / stream / 1000:7.1f}k events/s, cpu {cpu:6.3f} s",
                      file=sys.stderr)
    load_after = os.getloadavg()
    result = summarize(times, bench.lines, args.reps)
    result.update(mb=round(mb, 1), load=[round(load_before[0], 2), round(load_after[0], 2)])
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{bench.lines} events ({mb:.1f} MB), {args.reps} runs each, medians; load "
          f"{load_before[0]:.2f} -> {load_after[0]:.2f}")
    print(f"{'row':<11} {'streaming s':>11} {'events/s':>10} {'ratio':>6} {'paired':>6}   "
          f"{'wall s':>7} {'wall ratio':>10}   {'cpu s':>6} {'cpu ratio':>9}")
    for name, r in result["rows"].items():  # type: ignore[attr-defined]
        print(f"{name:<11} {r['stream_s']:>11.3f} {r['events_per_s'] / 1000:>9.1f}k "
              f"{r['ratio']:>6.2f} {r['paired_ratio']:>6.2f}   {r['wall_s']:>7.3f} "
              f"{r['wall_ratio']:>10.2f}   "
              f"{r['cpu_s']:>6.3f} {r['cpu_ratio']:>9.2f}")
    return 0


def summarize(times: dict[str, list[tuple[float, float, float]]], events: int, reps: int
              ) -> dict[str, object]:
    """Medians per row; ratios to the raw floor's medians (1.0 without a raw row)."""
    med = {name: tuple(statistics.median(run[i] for run in v) for i in range(3))
           for name, v in times.items()}
    floor = med.get("raw")
    rows = {}
    for name, (wall, stream, cpu) in med.items():
        rows[name] = {"stream_s": round(stream, 3), "wall_s": round(wall, 3),
                      "cpu_s": round(cpu, 3), "events_per_s": round(events / stream),
                      "ratio": round(floor[1] / stream, 2) if floor else 1.0,
                      "wall_ratio": round(floor[0] / wall, 2) if floor else 1.0,
                      "cpu_ratio": round(floor[2] / cpu, 2) if floor else 1.0,
                      # each run against the raw run of the same repetition (the load moves)
                      "paired_ratio": round(statistics.median(
                          r[1] / run[1] for r, run in zip(times["raw"], times[name],
                                                         strict=True)), 2) if floor else 1.0,
                      "stream_runs_s": [round(run[1], 3) for run in times[name]]}
    return {"events": events, "reps": reps, "rows": rows}


if __name__ == "__main__":
    sys.exit(main())
