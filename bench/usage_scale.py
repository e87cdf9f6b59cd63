"""Usage totals over a large store: ``tolaria usage`` and the Usage page's queries at 20,000 turns.

    python bench/usage_scale.py [--turns 20000] [--json]

A fresh ``TOLARIA_HOME`` gets ``--turns`` finished turns written through the real ``Store``:
400 chats, five agents, spread over the last 365 days; each Claude-like turn has three
per-message ``Usage`` events and then its result's (the last is the turn's), with cache
tokens, a cost, the context used of a 200k window and, now and then, rate limits. Then:

- ``python -m tolaria usage [--by chat|day|agent] [--json] [--since 30d]`` as child processes,
  timed from spawn to exit and by the child's CPU time (best of 3), next to the same command
  on an empty store (the start-up every command pays): the CPU ratio is what 20,000 turns add;
- in process, the Usage page's read (``chats.usage.report``: grouping, total, chart bars and
  rate limits; best of 5), with the ``turns_by_start`` index and without it (``--since``).

Results and the machine they ran on: docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tolaria.chats.usage import report, since_of  # noqa: E402
from tolaria.core.events import STOP_END_TURN, Done, Usage  # noqa: E402
from tolaria.core.store.db import Store  # noqa: E402

AGENTS = ("claude", "codex", "gemini", "qwen", "opencode")
LIMITS = [{"name": "five_hour", "used_percent": 40.0, "resets_at": 2e9, "status": "allowed"}]


def fill(db: Path, turns: int) -> float:
    """``turns`` finished turns through the real Store; seconds it took."""
    started = time.perf_counter()
    store = Store(db)
    now = time.time()
    chats = [store.create_conversation(f"chat {n}", AGENTS[n % len(AGENTS)], None).id
             for n in range(400)]
    for n in range(turns):
        chat = chats[n % len(chats)]
        agent = AGENTS[n % len(AGENTS)]
        sid = f"ai-agent-stream-bench{n}"
        store.start_turn(chat, sid, agent, "p",
                         started_at=now - (turns - n) * (365 * 86400 / turns))
        spent = 0
        for message in range(3):
            spent += 1000 + message
            store.append_event(Usage(sid, input_tokens=spent, output_tokens=spent // 10,
                                     cache_read_tokens=spent * 5, context_tokens=spent * 6))
        store.append_event(Usage(sid, input_tokens=spent, output_tokens=spent // 10,
                                 cost_usd=0.02 if agent == "claude" else None,
                                 cache_read_tokens=spent * 5, cache_write_tokens=100,
                                 context_tokens=spent * 6, context_window=200_000,
                                 rate_limits=LIMITS if n % 50 == 0 else None))
        store.append_event(Done(sid, stop_reason=STOP_END_TURN, duration_ms=20_000))
    store.close()
    return time.perf_counter() - started


def run_cli(home: Path, args: list[str], repeat: int = 3) -> tuple[float, float]:
    """Best wall time and best CPU time (the child's user + system) of ``repeat`` runs."""
    env = {**os.environ, "TOLARIA_HOME": str(home),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "tolaria", "usage", *args], env=env,
                              capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"tolaria usage {' '.join(args)} failed: {done.stderr}")
        best = min(best, elapsed)
        best_cpu = min(best_cpu, after.ru_utime - before.ru_utime
                       + after.ru_stime - before.ru_stime)
    return best, best_cpu


def in_process(db: Path, since: float | None, repeat: int = 5) -> tuple[float, float]:
    """Best wall time and best CPU time of the Usage page's read (by chat)."""
    store = Store(db)
    try:
        best, best_cpu = float("inf"), float("inf")
        for _ in range(repeat):
            started, cpu = time.perf_counter(), time.process_time()
            report(store, "chat", since)
            best = min(best, time.perf_counter() - started)
            best_cpu = min(best_cpu, time.process_time() - cpu)
        return best, best_cpu
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out: dict[str, Any] = {"turns": args.turns, "python": platform.python_version(),
                           "cpus": os.cpu_count(), "sqlite": sqlite3.sqlite_version}
    with tempfile.TemporaryDirectory() as tmp:
        empty, full = Path(tmp) / "empty", Path(tmp) / "full"
        empty.mkdir()
        full.mkdir()
        os.environ["TOLARIA_HOME"] = str(full)
        from tolaria.core.store.db import default_db_path

        db = default_db_path()
        out["fill_s"] = round(fill(db, args.turns), 1)
        out["db_mb"] = round(db.stat().st_size / 1e6, 1)
        cli: dict[str, tuple[float, float]] = {}
        cli["empty store"] = run_cli(empty, [])
        for label, extra in (("--by agent", []), ("--by chat", ["--by", "chat"]),
                             ("--by day", ["--by", "day"]), ("--json --by chat",
                                                             ["--json", "--by", "chat"]),
                             ("--since 30d", ["--since", "30d"])):
            cli[label] = run_cli(full, extra)
        out["cli_s"] = {k: round(v[0], 3) for k, v in cli.items()}
        out["cli_cpu_s"] = {k: round(v[1], 3) for k, v in cli.items()}
        out["cli_cpu_ratio_to_empty"] = {k: round(v[1] / cli["empty store"][1], 2)
                                         for k, v in cli.items()}
        page = {"all": in_process(db, None), "30 days": in_process(db, since_of("30d"))}
        with closing(sqlite3.connect(db)) as conn:
            conn.execute("DROP INDEX turns_by_start")
        page["30 days, no turns_by_start"] = in_process(db, since_of("30d"))
        out["page_ms"] = {k: round(v[0] * 1000, 1) for k, v in page.items()}
        out["page_cpu_ms"] = {k: round(v[1] * 1000, 1) for k, v in page.items()}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{args.turns} turns (filled in {out['fill_s']} s, {out['db_mb']} MB), "
          f"python {out['python']}, sqlite {out['sqlite']}, {out['cpus']} cpus")
    for label, seconds in out["cli_s"].items():
        print(f"  tolaria usage {label:<18} {seconds * 1000:7.0f} ms wall "
              f"{out['cli_cpu_s'][label] * 1000:7.0f} ms CPU  "
              f"x{out['cli_cpu_ratio_to_empty'][label]} the CPU of an empty store")
    for label, ms in out["page_ms"].items():
        print(f"  Usage page read, {label:<28} {ms:7.1f} ms wall "
              f"{out['page_cpu_ms'][label]:7.1f} ms CPU")


if __name__ == "__main__":
    main()
