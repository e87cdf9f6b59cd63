"""The ``linux`` process backend: ``/proc`` read directly, and the child subreaper.

Why not psutil for the reads: a stop reads a few small files of every process it considers,
one ``read`` each (procfs.py). Why the subreaper: a tool that double-forks out of the agent's
tree is re-parented to us instead of to PID 1, so it stays findable as our child even when it
scrubbed its environment (docs/adr/0002-stop-strategy.md). Light: ``tolaria abort`` imports it.
"""

from __future__ import annotations

from tolaria.core.process import procfs, procread
from tolaria.core.process.backend_base import ProcessBackend, ProcInfo

_PR_SET_CHILD_SUBREAPER = 36
#: Whether this process is a child subreaper (None: not asked yet).
_subreaper: bool | None = None


def set_subreaper(on: bool) -> bool:
    """``prctl(PR_SET_CHILD_SUBREAPER, on)``; returns whether it took. Turning it off is for
    tests that prove the portable backend in a process that was a subreaper before."""
    global _subreaper
    try:
        import ctypes  # only here: not on the abort's path

        libc = ctypes.CDLL(None, use_errno=True)
        took = bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        took = False
    _subreaper = on and took
    return took


class LinuxBackend(ProcessBackend):
    name = "linux"
    reads_signal_masks = True

    def pids(self) -> list[int]:
        return procfs.pids()

    def info(self, pid: int) -> ProcInfo | None:
        return procfs.stat(pid)

    def children(self, pid: int) -> list[int] | None:
        return procfs.children(pid)

    def environ(self, pid: int) -> bytes | None:
        return procfs.environ(pid)

    def real_uid(self, pid: int) -> int | None:
        return procfs.real_uid(pid)

    def ignores_signal(self, pid: int, sig: int) -> bool:
        return procfs.ignores_signal(pid, sig)

    def start_ticks(self, pid: int) -> int | None:
        return procread.start_ticks(pid)

    def now_ticks(self) -> int:
        return procfs.now_ticks()

    def cmdline(self, pid: int) -> list[str] | None:
        return procread.cmdline(pid)

    def cwd(self, pid: int) -> str | None:
        return procread.cwd(pid)

    def enable_subreaper(self) -> bool:
        if _subreaper is None:
            set_subreaper(True)
        return bool(_subreaper)

    def subreaper_active(self) -> bool:
        return bool(_subreaper)
