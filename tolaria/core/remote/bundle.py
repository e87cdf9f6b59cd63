"""The supervisor as one content-addressed unit for the host (ADR 0026, Layout).

The supervisor/ package's files are put in a deterministic zip: in name order, each with the same fixed
timestamp, mode and system, stored uncompressed (no zlib version in the bytes), with a
``__main__.py`` that runs it. The bytes depend on the wheel's files alone, so the hash the
bootstrap checks is the same wherever the same wheel is installed, and building twice gives the
same bytes. The host runs the zip with ``runpy.run_path`` (as ``python3 FILE.pyz`` would).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

#: The supervisor's name inside the bundle (unique: the zip comes first on the host's sys.path).
NAME = "tolaria_supervisor"
#: The bundle's own entry point: runs the supervisor as ``__main__``.
MAIN = b'import runpy\nrunpy.run_module("' + NAME.encode() + b'", run_name="__main__")\n'
_STAMP = (1980, 1, 1, 0, 0, 0)
_HERE = Path(__file__).resolve().parent


def sources() -> dict[str, bytes]:
    """What the bundle holds besides its ``__main__.py``: name in the zip -> the file's bytes
    (every module of the supervisor/ package, under ``NAME/``)."""
    return {f"{NAME}/{path.name}": path.read_bytes() for path in package_files()}


def package_files() -> list[Path]:
    """The supervisor package's files that go to the host, in name order."""
    return sorted((_HERE / "supervisor").glob("*.py"))


def build(files: dict[str, bytes]) -> bytes:
    """The zip of ``files`` and ``MAIN``, the same bytes for the same files on any machine."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for name, data in sorted({**files, "__main__.py": MAIN}.items()):
            info = zipfile.ZipInfo(name, _STAMP)
            info.create_system = 3  # Unix, on any platform (the default follows the builder's)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_STORED
            zf.writestr(info, data)
    return out.getvalue()
