"""What this platform lets Tolaria do, asked at call time (``sys.platform``, never cached).

Tolaria's promise is that Stop ends a run and everything it started. On Linux and macOS that
rests on sessions, process groups and signals (ADR 0002); on Windows it needs a kill-on-close
Job Object per run, which is designed (ADR 0014) but not built or tested. Until it is, a run
there is refused with one line rather than started with a weaker Stop: ``run_refusal``.

The control channel (``tolaria streams`` / ``tolaria abort``) is a Unix socket; CPython has no
``AF_UNIX`` on Windows, and the named-pipe channel of ADR 0014 is not built either:
``control_channel``.

Checked at call time so a test can fake ``sys.platform`` in a subprocess, and so mypy's
``--platform`` runs see each branch (mypy narrows on ``sys.platform`` written out, which is
why the callers that need a POSIX call spell the check themselves).
"""

from __future__ import annotations

import sys

#: The design of Stop on Windows (Job Objects, CTRL_BREAK_EVENT, the control channel).
WINDOWS_ADR = "docs/adr/0014-windows-job-objects.md"

RUNS_REFUSED_ON_WINDOWS = (
    "runs are not supported on Windows yet: Stop there needs a Job Object per run, designed "
    f"but untested ({WINDOWS_ADR})"
)


def run_refusal() -> str | None:
    """One line saying why no agent can be started on this platform; None where runs work."""
    if sys.platform == "win32":
        return RUNS_REFUSED_ON_WINDOWS
    return None


def control_channel() -> bool:
    """Whether this process can listen for, and talk to, other Tolaria processes (a Unix socket
    in the socket folder). False on Windows (ADR 0014: named pipes, not built yet)."""
    if sys.platform == "win32":
        return False
    import _socket

    return hasattr(_socket, "AF_UNIX")
