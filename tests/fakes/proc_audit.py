"""``python proc_audit.py OUT TOLARIA-ARGS...``: ``tolaria ARGS`` with an audit hook that notes
every opening of a path under ``/proc`` (``open``, ``os.open``, ``os.listdir``, ``os.scandir``)
whose call stack holds no frame of psutil's; at exit they go to OUT as JSON:
``{"foreign": [{"event", "path", "stack"}...], "psutil": <how many psutil made>}``.

Used by tests/core/process/test_portable_audit.py: with the portable backend, Tolaria's own code
must never read /proc (psutil reading it on Linux is the one allowed way, ADR 0016). The hook
goes in before anything of Tolaria is imported; audit hooks cannot be removed, hence a process
of its own.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from typing import Any

_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})
_PSUTIL = f"{os.sep}psutil{os.sep}"
foreign: list[dict[str, Any]] = []
by_psutil = [0]


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event not in _EVENTS or not args or not isinstance(args[0], str | bytes | os.PathLike):
        return
    path = os.fsdecode(args[0])
    if path != "/proc" and not path.startswith("/proc/"):
        return
    stack = []
    frame = sys._getframe(1)
    while frame is not None:
        stack.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
        frame = frame.f_back  # type: ignore[assignment]
    if any(_PSUTIL in where for where in stack):
        by_psutil[0] += 1
    else:
        foreign.append({"event": event, "path": path, "stack": stack[:10]})


def _report(out: str) -> None:
    with open(out, "w") as fh:
        json.dump({"foreign": foreign, "psutil": by_psutil[0]}, fh)


def main() -> int:
    out, args = sys.argv[1], sys.argv[2:]
    atexit.register(_report, out)  # first registered: runs last, after Tolaria's own atexit
    sys.addaudithook(_hook)
    from tolaria.cli.main import main as tolaria_main

    return tolaria_main(args)


if __name__ == "__main__":
    sys.exit(main())
