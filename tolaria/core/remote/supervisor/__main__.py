"""``python3 -m`` the package, or the bundle's ``__main__.py``: run the supervisor (a Windows
host is told it is not supported by the package's ``__init__``)."""

from __future__ import annotations

import sys

# POSIX only: the imports follow the assert, so that mypy --platform win32 skips them too.
assert sys.platform != "win32", "the supervisor runs on POSIX hosts (its frames: any)"

from .main import main  # noqa: E402

if __name__ == "__main__":  # not when imported (a walk over the packages)
    sys.exit(main())
