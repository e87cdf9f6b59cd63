"""The supervisor's framed protocol (ADR 0026): each frame is one kind byte, a 4-byte big-endian
length and the payload. Shared with Tolaria's side (link.py, on any platform)."""

from __future__ import annotations

import struct

VERSION = "1"
MARKER = "TOLARIA_STREAM_ID"
#: In the START's argv and env: the folder of its ``files`` (the run's MCP configs; ADR 0019).
FILES = "{tolaria-run-files}"

HEADER = struct.Struct(">cI")
MAX_FRAME = 1 << 24

# Tolaria -> supervisor
START = b"S"
STDIN = b"I"
STDIN_EOF = b"E"
SIGNAL = b"G"
STOP = b"K"
HEARTBEAT = b"H"
ATTACH = b"A"  # instead of START: reattach to a kept run (stream id, output offset)
# supervisor -> Tolaria
READY = b"V"
STDOUT = b"O"
STDERR = b"R"
FAILED = b"F"
GONE = b"D"
ATTACHED = b"T"  # the replay follows: where it starts, how many bytes were dropped

_CHUNK = 65536


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    """One frame: kind, length, payload."""
    return HEADER.pack(kind, len(payload)) + payload


class FrameReader:
    """Frames out of a byte stream that arrives in pieces."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        self._buf += data
        out = []
        while len(self._buf) >= HEADER.size:
            kind, size = HEADER.unpack_from(self._buf)
            if size > MAX_FRAME:
                raise ValueError(f"frame of {size} bytes is too large")
            end = HEADER.size + size
            if len(self._buf) < end:
                break
            out.append((kind, self._buf[HEADER.size:end]))
            self._buf = self._buf[end:]
        return out

