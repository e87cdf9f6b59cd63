"""The line reader delivers exactly the lines of the stream, in order, however the bytes are cut
into reads: each decoded on its own (bad UTF-8 replaced), the ones over the limit reported by
size instead (tolaria/core/linereader.py reads a chunk's middle lines in one decode)."""

from __future__ import annotations

import asyncio
import random

import pytest
from helpers import async_test

from tolaria.core import linereader
from tolaria.core.linereader import read_lines


def expected(data: bytes, max_line: int) -> list[tuple[str, object]]:
    """What the reader must report: the stream split at every newline, each line alone."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # a final newline ends the last line, it does not start another
    return [("oversized", len(raw)) if len(raw) > max_line
            else ("line", raw.decode("utf-8", errors="replace")) for raw in lines]


async def read_all(pieces: list[bytes], max_line: int) -> list[tuple[str, object]]:
    reader = asyncio.StreamReader(limit=2**30)
    got: list[tuple[str, object]] = []
    task = asyncio.ensure_future(read_lines(reader, lambda line: got.append(("line", line)),
                                            lambda size: got.append(("oversized", size)),
                                            max_line))
    for piece in pieces:
        reader.feed_data(piece)
        await asyncio.sleep(0)  # the reader takes what is there: reads end anywhere
    reader.feed_eof()
    await task
    return got


def cut(data: bytes, rng: random.Random, biggest: int) -> list[bytes]:
    pieces, at = [], 0
    while at < len(data):
        n = rng.randint(1, biggest)
        pieces.append(data[at:at + n])
        at += n
    return pieces


_ATOMS = (b"a", b"xyz", b"\n", b"\n\n", "é".encode(), "→".encode(), "😀".encode(),
          "😀".encode()[:2], b"\xff", b"\xe2\x82", b"\r\n", b"{\"k\": 1}", b"\x00")


@pytest.mark.parametrize("seed", range(40))
@async_test
async def test_every_line_in_order_however_the_reads_fall(seed: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(linereader, "CHUNK", rng.choice((7, 64, 1000)))
    data = b"".join(rng.choice(_ATOMS) * rng.randint(1, 30) for _ in range(rng.randint(0, 400)))
    max_line = rng.choice((5, 40, 300, 10**6))
    got = await read_all(cut(data, rng, rng.choice((3, 50, 5000))), max_line)
    assert got == expected(data, max_line)


@async_test
async def test_a_flood_of_json_lines_arrives_whole() -> None:
    lines = [f'{{"type":"stream_event","n":{i},"text":"d\u00e9lta {i}"}}' for i in range(20_000)]
    data = ("\n".join(lines) + "\n").encode()
    got = await read_all([data[i:i + 65536] for i in range(0, len(data), 65536)], 2**20)
    assert got == [("line", line) for line in lines]


@async_test
async def test_an_oversized_line_among_short_ones_in_one_read() -> None:
    data = b"one\n" + b"x" * 50 + b"\ntwo\nthree"
    assert await read_all([data], 10) == [("line", "one"), ("oversized", 50), ("line", "two"),
                                          ("line", "three")]
