"""The exit codes of the ``tolaria`` command (tolaria/cli/main.py says what each means) and the
stop signals that reach ``tolaria run`` before it has a run to stop (tolaria/cli/run_cmd.py).

Imported by every subcommand, ``tolaria abort`` too: nothing here imports anything at load.
"""

from __future__ import annotations

import sys

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_CANCELLED = 0, 1, 2, 130
#: ``tolaria run``'s reader went away (``| head -1``): the run was stopped. 128 + SIGPIPE, as a
#: shell reports a program killed by the broken pipe.
EXIT_BROKEN_PIPE = 141


#: SIGINT/SIGTERM/SIGHUP received while ``tolaria run`` started, before it had a run to stop:
#: the run stops as soon as it is reserved (it ends cancelled, nothing spawned).
early_signals: list[int] = []


def catch_early_signals() -> None:
    """Keep a stop signal that comes before the run is reserved instead of dying half-way
    (a KeyboardInterrupt traceback, a turn left "running" in the store). A second one acts as
    if no handler were there, so a start-up that hangs can still be interrupted. Installed
    before the claim: once another terminal can name the run, its signals are kept too."""
    if sys.platform == "win32":  # runs are refused there (ADR 0014), and it has no SIGHUP
        return
    import signal

    def early(signum: int, _frame: object) -> None:
        if early_signals:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
        early_signals.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, early)
