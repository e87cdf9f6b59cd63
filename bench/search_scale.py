"""Ctrl+F on a long chat: ``Store.search_turns`` against the raw-payload search it replaced.

    python bench/search_scale.py [--turns 2000] [--text 9000] [--repeat 5] [--json]

One conversation of ``--turns`` finished turns (~``--text`` characters of answer text and one
shell tool call each, written through the real ``Store``: ``fill_chat`` in tests/helpers.py) in
a fresh SQLite file. For each needle, the median time of ``--repeat`` searches, two ways in the
same run on the same file:

- ``shown``: ``Store.search_turns`` as it is (issue 22 item 7: only what the transcript shows,
  the raw payload used as a cheap pre-test, then the JSON value of each passing row; plus the
  pass across row cuts);
- ``raw``: the query before issue 22 (``instr`` over each whole lowered payload, which also
  matched JSON keys and ids), with the same pass across row cuts.

Needles: a rare word (one turn), a word of every answer, a tool command, and "text" (a JSON key
of every text row: the worst case for the pre-test, every row passes it and is parsed). The
ratio shown/raw is the cost of matching only what is shown. Results: docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from helpers import fill_chat  # noqa: E402  (tests/helpers.py)

from tolaria.core.store.db import Store  # noqa: E402
from tolaria.core.store.pages import SEARCHABLE_KINDS, ascii_lower  # noqa: E402

NEEDLES = {"rare": "turn-1234-marker", "common": "restoring a long chat",
           "command": "ls -la src/77", "json key": "text"}


def raw_search(store: Store, conversation_id: int, needle: str) -> list[int]:
    """The pre-issue-22 query: the needle anywhere in the lowered payload (keys and ids too)."""
    lowered = ascii_lower(needle)
    spelled = json.dumps(lowered, ensure_ascii=False)[1:-1]
    marks = ", ".join("?" for _ in SEARCHABLE_KINDS)
    rows = store._query(
        "SELECT id FROM turns WHERE conversation_id = ? AND (instr(lower(prompt), ?) > 0"
        " OR EXISTS (SELECT 1 FROM events e WHERE e.turn_id = turns.id"
        f" AND e.kind IN ({marks}) AND instr(lower(CAST(e.payload AS TEXT)), ?) > 0))"
        " ORDER BY id DESC LIMIT ?",
        conversation_id, lowered, *SEARCHABLE_KINDS, spelled, 1000, flush=True)
    found = {row[0] for row in rows} | store._across_rows(conversation_id, spelled)
    return sorted(found)


def median_ms(call: object, repeat: int) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        count = len(call())  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--text", type=int, default=9000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "search.sqlite3")
        try:
            chat = store.create_conversation("long", "demo", None).id
            fill_chat(store, chat, args.turns, text_chars=args.text)
            results = {}
            for label, needle in NEEDLES.items():
                shown, shown_n = median_ms(lambda n=needle: store.search_turns(chat, n),
                                           args.repeat)
                raw, raw_n = median_ms(lambda n=needle: raw_search(store, chat, n), args.repeat)
                results[label] = {"needle": needle, "shown_ms": round(shown, 1),
                                  "shown_matches": shown_n, "raw_ms": round(raw, 1),
                                  "raw_matches": raw_n, "ratio": round(shown / raw, 2)}
        finally:
            store.close()
    if args.json:
        print(json.dumps({"turns": args.turns, "text": args.text, "results": results}))
        return
    print(f"{args.turns} turns of ~{args.text} characters, median of {args.repeat}")
    for label, row in results.items():
        print(f"  {label:9} {row['needle']!r:26} shown {row['shown_ms']:7.1f} ms"
              f" ({row['shown_matches']} turns)   raw {row['raw_ms']:7.1f} ms"
              f" ({row['raw_matches']} turns)   ratio {row['ratio']}")


if __name__ == "__main__":
    main()
