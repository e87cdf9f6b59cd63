"""Fuzz stream ids: the validator and the real control socket. See docs/RELIABILITY.md.

    python bench/fuzz.py [--ids 100000] [--socket 5000] [--seed 1]

``--ids`` generated strings (valid ids, near misses around the prefix, the 64-character limit
and the alphabet, random text, control characters, non-ASCII) go through
``validate_stream_id`` and are compared with an independent regex of the contract
(docs/adr/0001). ``--socket`` generated requests (the same ids in abort requests, wrong JSON
types, random bytes, oversized lines) go through a real ``ControlServer`` on a Unix socket, one
connection each: a valid id must be answered ``{"ok": true, "stopped": false}`` (no run has
it), anything else ``{"ok": false, "error": ...}``; the server must answer ``list`` afterwards.
A live run (a sleeping fake agent) sits in the registry throughout and must be untouched.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from helpers import fake_manifest, marker_pids, start_run  # noqa: E402

from tolaria.core.process.control import ControlServer  # noqa: E402
from tolaria.core.process.registry import ProcessRegistry  # noqa: E402
from tolaria.core.stream_id import PREFIX, InvalidStreamId, validate_stream_id  # noqa: E402

ORACLE = re.compile(r"ai-agent-stream-[A-Za-z0-9-]{1,64}")
ALPHABET = "abcdefXYZ0123456789-_.:/ \t\n\r\x00\x7f\u00e9\u0130\u4e2d\U0001f600\ufeff\u0660"


def generate_id(rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return PREFIX + "".join(rng.choice("abcdefABCDEF0123456789-") for _ in
                                range(rng.randint(1, 64)))
    if kind == 1:  # around the length limit
        return PREFIX + "a" * rng.randint(60, 70)
    if kind == 2:  # near misses in the alphabet
        return PREFIX + "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 70)))
    if kind == 3:  # broken prefix
        p = list(PREFIX)
        p[rng.randrange(len(p))] = rng.choice(ALPHABET)
        return "".join(p) + "abc"
    if kind == 4:  # wrapped valid ids
        return rng.choice([" ", "\n", "\x00", "", "/"]) + PREFIX + "abc" + rng.choice(
            ["\n", " ", "\x00", "", "/..", "\u200b"])
    if kind == 5:  # case
        return PREFIX.upper() + "abc"
    if kind == 6:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 100)))
    return str(rng.randint(1, 2**22))  # a pid


def fuzz_validator(count: int, rng: random.Random) -> dict[str, object]:
    accepted = mismatches = 0
    started = time.perf_counter()
    for _ in range(count):
        value = generate_id(rng)
        try:
            validate_stream_id(value)
            ok = True
        except InvalidStreamId:
            ok = False
        accepted += ok
        if ok != (ORACLE.fullmatch(value) is not None):
            mismatches += 1
    seconds = time.perf_counter() - started
    return {"ids": count, "accepted": accepted, "refused": count - accepted,
            "mismatches": mismatches, "seconds": round(seconds, 2),
            "us_per_id": round(seconds / count * 1e6, 2)}


async def fuzz_socket(count: int, rng: random.Random) -> dict[str, object]:
    registry = ProcessRegistry()
    folder = Path(tempfile.mkdtemp(prefix="tolaria-fuzz-"))
    server = ControlServer(registry, folder=folder)
    await server.start()
    live = start_run(fake_manifest("hang"), registry=registry)
    wrong = crashes = valid = 0
    started = time.perf_counter()
    try:
        while not live.collector.events:  # noqa: ASYNC110 - polling a plain list
            await asyncio.sleep(0.01)
        for i in range(count):
            kind = rng.randrange(4)
            expect_ok: bool | None
            if kind == 0:
                sid = generate_id(rng)
                payload = json.dumps({"op": "abort", "stream_id": sid}).encode() + b"\n"
                expect_ok = ORACLE.fullmatch(sid) is not None
            elif kind == 1:
                value = rng.choice([None, 1, 2.5, True, [], {}, [PREFIX + "a"], {"id": 1}])
                payload = json.dumps({"op": "abort", "stream_id": value}).encode() + b"\n"
                expect_ok = False
            elif kind == 2:
                payload = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))) + b"\n"
                expect_ok = None
            else:
                payload = b'{"op":"abort","stream_id":"' + b"a" * rng.randint(4000, 9000) + b'"}\n'
                expect_ok = False
            try:
                reader, writer = await asyncio.open_unix_connection(str(server.path))
                writer.write(payload)
                await writer.drain()
                answer = json.loads(await asyncio.wait_for(reader.readline(), 10))
                writer.close()
            except Exception as exc:
                crashes += 1
                print(f"request {i}: {exc!r}", file=sys.stderr)
                continue
            valid += expect_ok is True
            if (expect_ok is True and answer != {"ok": True, "stopped": False}) or (expect_ok is not True and answer.get("ok") is not False):
                wrong += 1
        seconds = time.perf_counter() - started
        listed = await _list(server.path)
        untouched = not live.task.done() and bool(marker_pids(live.stream_id))
    finally:
        live.abort()
        await live.finish()
        await server.close()
        folder.rmdir()
    return {"requests": count, "valid_ids": valid, "wrong_answers": wrong,
            "failed_requests": crashes, "list_after": listed, "live_run_untouched": untouched,
            "seconds": round(seconds, 2)}


async def _list(path: Path) -> bool:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(b'{"op": "list"}\n')
    answer = json.loads(await reader.readline())
    writer.close()
    return bool(answer.get("ok")) and len(answer.get("streams", [])) == 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=100_000)
    parser.add_argument("--socket", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ids = fuzz_validator(args.ids, rng)
    print("validator:", json.dumps(ids))
    sock = asyncio.run(fuzz_socket(args.socket, rng))
    print("socket:   ", json.dumps(sock))
    ok = (ids["mismatches"] == 0 and sock["wrong_answers"] == 0 and sock["failed_requests"] == 0
          and sock["list_after"] and sock["live_run_untouched"])
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
