"""Bounded line reading from a pipe.

Agents print multi-megabyte JSON lines, floods, binary junk and, when broken, a single line of
hundreds of megabytes. Lines up to ``max_line`` bytes are delivered; a longer line is dropped
while it streams by (memory stays bounded) and reported once through ``on_oversized``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

DEFAULT_MAX_LINE = 16 * 1024 * 1024
CHUNK = 256 * 1024


async def read_lines(
    stream: asyncio.StreamReader,
    on_line: Callable[[str], None],
    on_oversized: Callable[[int], None],
    max_line: int = DEFAULT_MAX_LINE,
) -> None:
    buf = bytearray()
    dropping = 0  # >0 while skipping the rest of an oversized line: bytes skipped so far
    while True:
        chunk = await stream.read(CHUNK)
        if not chunk:
            break
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                rest = len(chunk) - start
                if dropping:
                    dropping += rest
                elif len(buf) + rest > max_line:
                    dropping = len(buf) + rest
                    buf.clear()
                else:
                    buf += chunk[start:]
                break
            if dropping:
                on_oversized(dropping + (nl - start))
                dropping = 0
            elif len(buf) + (nl - start) > max_line:
                on_oversized(len(buf) + (nl - start))
                buf.clear()
            else:
                buf += chunk[start:nl]
                on_line(buf.decode("utf-8", errors="replace"))
                buf.clear()
            start = nl + 1
    if dropping:
        on_oversized(dropping)
    elif buf:
        on_line(buf.decode("utf-8", errors="replace"))
