"""One process of a control-socket burst: ``python burst_client.py SOCKET WORKERS EACH GATE``.

Waits for the file GATE, then WORKERS connections at a time, EACH requests per worker, one
``{"op": "list"}`` per connection, no retry (a reset or refused connection is counted as an
error, not papered over). Prints ``{"ok": N, "errors": {kind: count}, "start": t, "end": t}``
(CLOCK_MONOTONIC, comparable between processes).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time


async def one(path: str) -> str:
    reader, writer = await asyncio.open_unix_connection(path)
    try:
        writer.write(b'{"op": "list"}\n')
        line = await asyncio.wait_for(reader.readline(), 30)
        if not line:
            return "closed without an answer"
        return "ok" if json.loads(line).get("ok") is True else f"answer {line[:80]!r}"
    finally:
        writer.close()


async def worker(path: str, each: int, tally: dict[str, int]) -> None:
    for _ in range(each):
        try:
            kind = await one(path)
        except Exception as exc:  # reset, refused, timeout: what the burst must not produce
            kind = type(exc).__name__
        tally[kind] = tally.get(kind, 0) + 1


async def main(path: str, workers: int, each: int) -> None:
    tally: dict[str, int] = {}
    start = time.monotonic()
    await asyncio.gather(*(worker(path, each, tally) for _ in range(workers)))
    ok = tally.pop("ok", 0)
    print(json.dumps({"ok": ok, "errors": tally, "start": start, "end": time.monotonic()}))


while not os.path.exists(sys.argv[4]):
    time.sleep(0.002)
asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
