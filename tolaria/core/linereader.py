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
    """Call ``on_line`` for every line of ``stream`` (without its newline, decoded as UTF-8 with
    bad bytes replaced), in order, ``on_oversized`` with the size of each line over
    ``max_line`` bytes instead; the last line needs no newline.

    Each read's complete lines are handled before the next read (a stop is seen between
    reads): the lines between its first and last newline are decoded at once and split (a
    newline is never part of a UTF-8 sequence, so that decodes each line as alone).
    """
    buf = bytearray()
    dropping = 0  # >0 while skipping the rest of an oversized line: bytes skipped so far
    while True:
        chunk = await stream.read(CHUNK)
        if not chunk:
            break
        last = chunk.rfind(b"\n")
        if last < 0:  # still inside one line
            if dropping:
                dropping += len(chunk)
            elif len(buf) + len(chunk) > max_line:
                dropping = len(buf) + len(chunk)
                buf.clear()
            else:
                buf += chunk
            continue
        first = chunk.find(b"\n")
        # The line that began in an earlier read (or at this read's start).
        if dropping:
            on_oversized(dropping + first)
            dropping = 0
        elif len(buf) + first > max_line:
            on_oversized(len(buf) + first)
            buf.clear()
        elif buf:
            buf += chunk[:first]
            line = buf.decode("utf-8", errors="replace")
            buf.clear()
            on_line(line)
        else:
            on_line(chunk[:first].decode("utf-8", errors="replace"))
        if last > first:
            middle = chunk[first + 1:last]
            if len(middle) <= max_line:  # so is every line in it
                for line in middle.decode("utf-8", errors="replace").split("\n"):
                    on_line(line)
            else:
                for raw in middle.split(b"\n"):
                    if len(raw) > max_line:
                        on_oversized(len(raw))
                    else:
                        on_line(raw.decode("utf-8", errors="replace"))
        rest = len(chunk) - last - 1
        if rest > max_line:
            dropping = rest
        elif rest:
            buf += chunk[last + 1:]
    if dropping:
        on_oversized(dropping)
    elif buf:
        on_line(buf.decode("utf-8", errors="replace"))
