"""Exporting a long chat: ``tolaria export`` in each format on stores of 10 to 5,000 turns.

    python bench/export_scale.py [--sizes 10,1000,5000] [--shape agent|filler] [--json]

For each size a fresh ``TOLARIA_HOME`` gets one chat of that many finished turns, written
through the real ``Store``:

- ``agent`` (default): a turn as coding agents write them: a prompt, ~300 characters of
  thinking, a ~1.6 KB Markdown answer (a heading, a list, inline code, a table and a 9-line
  Python block), a shell tool with ~900 characters of output, an edit with its diff, usage.
  About 5 KB stored per turn.
- ``filler``: tests/helpers.py ``fill_chat`` (as bench/restore_scale.py): ~9 KB of answer text
  and one shell call per turn.

Then ``python -m tolaria export 1 --format F -o FILE`` runs as a child process for each format
(the real command: start-up, store, writing), timed from spawn to exit; the child's CPU time
comes from ``resource.getrusage(RUSAGE_CHILDREN)``. Target (issue 27): <= 5 s per format at
5,000 turns. Results and the machine they ran on: docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

ANSWER = """## What the parser does with `{n}`

The tokenizer reads the **whole** input first, then the parser walks the tokens. Turn {n}
changes three things:

1. `read_token` keeps the position of each token, so errors can point at the column;
2. the parser stops at the first *unexpected* token instead of guessing;
3. the tests cover the empty input and a lone `<` (which used to loop).

| case | before | after |
|---|---|---|
| empty | crash | `[]` |
| `<` | hang | error at 1:1 |

```python
def read_token(text: str, pos: int) -> Token:
    start = pos
    while pos < len(text) and text[pos].isalnum():
        pos += 1
    if pos == start:
        raise ParseError(f"unexpected {{text[pos]!r}}", start)
    return Token(text[start:pos], start)


```

Run `pytest tests/test_parser.py -q` to check it; everything else is unchanged.
"""
OUTPUT = "".join(f"tests/test_parser.py::test_case_{i} PASSED{' ' * (i % 7)}\n"
                 for i in range(18)) + "18 passed in 0.42s\n"


def fill_agent(store: Any, chat: int, turns: int) -> None:
    from tolaria.core.events import (
        Done,
        TextDelta,
        ThinkingDelta,
        ToolDone,
        ToolStart,
        Usage,
    )
    from tolaria.core.stream_id import new_stream_id

    for n in range(turns):
        sid = new_stream_id()
        store.start_turn(chat, sid, "claude", f"Turn {n}: make the parser report the column "
                                              "of a bad token, and add tests")
        store.append_event(ThinkingDelta(sid, text="The user wants positions. " * 12))
        store.append_event(ToolStart(sid, tool_id=f"b{n}", name="Bash",
                                     input={"command": "pytest tests/test_parser.py -q"}))
        store.append_event(ToolDone(sid, tool_id=f"b{n}", output=OUTPUT))
        store.append_event(ToolStart(sid, tool_id=f"e{n}", name="Edit", input={
            "file_path": "src/parser.py",
            "old_string": f"def read_token(text, pos):\n    # turn {n}\n    return text[pos]\n",
            "new_string": "def read_token(text: str, pos: int) -> Token:\n    start = pos\n"
                          "    return Token(text[start:pos], start)\n"}))
        store.append_event(ToolDone(sid, tool_id=f"e{n}", output="The file was updated."))
        store.append_event(TextDelta(sid, text=ANSWER.format(n=n)))
        store.append_event(Usage(sid, input_tokens=12_000 + n, output_tokens=800,
                                 cost_usd=0.021))
        store.append_event(Done(sid, stop_reason="end_turn", duration_ms=9_000 + n))
    store.flush()


def fill(turns: int, shape: str) -> None:
    """(In a child whose TOLARIA_HOME is the fresh home.) Write the chat."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tolaria.core.store.db import Store

    store = Store()
    try:
        chat = store.create_conversation(f"{turns} turns", "claude", str(Path.home()))
        if shape == "filler":
            from helpers import fill_chat  # tests/helpers.py

            fill_chat(store, chat.id, turns)
        else:
            fill_agent(store, chat.id, turns)
    finally:
        store.close()


def measure(home: Path, fmt: str, out: Path) -> dict[str, Any]:
    env = {**os.environ, "TOLARIA_HOME": str(home),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tolaria", "export", "1", "--format", fmt,
                           "-o", str(out)], env=env, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"export failed: {done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"format": fmt, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "out_mb": round(out.stat().st_size / 1e6, 1),
            "max_rss_mb": round(after.ru_maxrss / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,1000,5000")
    parser.add_argument("--shape", choices=("agent", "filler"), default="agent")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fill", nargs=2, metavar=("TURNS", "SHAPE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        fill(int(args.fill[0]), args.fill[1])
        return
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="tolaria-export-bench-") as tmp:
            home = Path(tmp) / "home"
            env = {**os.environ, "TOLARIA_HOME": str(home), "PYTHONPATH": str(ROOT)}
            subprocess.run([sys.executable, __file__, "--fill", str(size), args.shape], env=env,
                           check=True)
            store_mb = sum(p.stat().st_size for p in home.rglob("tolaria.sqlite3*")) / 1e6
            for fmt in ("json", "md", "html"):
                row = {"turns": size, "shape": args.shape, "store_mb": round(store_mb, 1),
                       **measure(home, fmt, Path(tmp) / f"chat.{fmt}")}
                results.append(row)
                if not args.json:
                    print(f"{size:>6} turns  {fmt:<4}  {row['wall_s']:>6.2f} s wall  "
                          f"{row['cpu_s']:>6.2f} s cpu  {row['out_mb']:>6.1f} MB out  "
                          f"(store {row['store_mb']} MB, rss {row['max_rss_mb']} MB)",
                          flush=True)
    if args.json:
        print(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                      "load": os.getloadavg()}, "results": results}, indent=2))


if __name__ == "__main__":
    main()
