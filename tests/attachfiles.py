"""Real image files for the attachment tests: a PNG written byte by byte (no imaging library)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def png_bytes(width: int = 8, height: int = 8, rgb: tuple[int, int, int] = (200, 30, 60),
              noise: bool = False) -> bytes:
    """A valid RGB PNG; ``noise`` makes the pixels vary (so a large one does not compress)."""
    import os

    row_len = width * 3
    rows = []
    for _ in range(height):
        pixels = os.urandom(row_len) if noise else bytes(rgb) * width
        rows.append(b"\0" + pixels)
    raw = zlib.compress(b"".join(rows), 1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw)
            + chunk(b"IEND", b""))


def write_png(path: Path, **kwargs: object) -> bytes:
    data = png_bytes(**kwargs)  # type: ignore[arg-type]
    path.write_bytes(data)
    return data
