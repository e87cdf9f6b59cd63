"""``python3 -m`` the package, or the bundle's ``__main__.py``: run the supervisor."""

from __future__ import annotations

import sys

if sys.platform == "win32" and __name__ == "__main__":
    sys.stdout.write("TOLARIA-ERROR Windows hosts are not supported yet (use WSL: "
                     "exec:wsl -d Ubuntu --)\n")
    sys.exit(7)
# POSIX only: the imports follow the assert, so that mypy --platform win32 skips them too.
assert sys.platform != "win32", "the supervisor runs on POSIX hosts (its frames: any)"

from .main import main  # noqa: E402

if __name__ == "__main__":  # not when imported (a walk over the packages)
    sys.exit(main())
