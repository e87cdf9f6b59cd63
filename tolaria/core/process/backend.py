"""The stop engine's one seam to the platform (docs/adr/0016-process-backend-seam.md).

Everything a stop needs from the operating system goes through one ``ProcessBackend``: list the
processes with their parent, session, group, start time, owner, state and environment marker
(and the ignored signals where they can be read), signal a process or a group, find the
children adopted by this process. Two backends:

- ``linux`` (linux_backend.py): reads ``/proc`` directly (procfs.py, procread.py) and makes the
  app a child subreaper, so a double-forked daemon comes back to it.
- ``portable`` (portable_backend.py): psutil's cross-platform API and POSIX calls
  (``os.getpgid``, ``os.getsid``, ``os.killpg``); no subreaper, and no ``/proc`` read of
  Tolaria's own (psutil reads it on Linux: that is its business). What macOS and the BSDs use,
  and what ``TOLARIA_PROCESS_BACKEND=portable`` forces on Linux, to prove it there.

The choice: ``TOLARIA_PROCESS_BACKEND`` (``linux``, ``portable``, ``auto``), else the
``[behaviour] process_backend`` setting (``configure``), else automatic (linux where ``/proc``
is, portable elsewhere). Light on purpose: ``tolaria abort`` imports this (no typing, no
dataclasses: tests/cli/test_fast_commands.py pins its imports).
"""

from __future__ import annotations

import os
import sys

# The interface, re-exported: callers name ``backend.ProcInfo``, ``backend.SIGKILL``...
from tolaria.core.process.backend_base import CLK_TCK as CLK_TCK
from tolaria.core.process.backend_base import SIGKILL as SIGKILL
from tolaria.core.process.backend_base import SIGTERM as SIGTERM
from tolaria.core.process.backend_base import ProcessBackend as ProcessBackend
from tolaria.core.process.backend_base import ProcInfo as ProcInfo

#: The environment variable that forces a backend (for tests, and for users).
ENV_VAR = "TOLARIA_PROCESS_BACKEND"
CHOICES = ("auto", "linux", "portable")
#: What the ``[behaviour] process_backend`` setting chose (``configure``): auto until then.
_configured = "auto"
_instances: dict[str, ProcessBackend] = {}


class BackendChoiceError(ValueError):
    """An unknown or unusable backend name; its text is one line for the user."""


def auto_name() -> str:
    """The backend a platform gets by default: linux where /proc is, portable elsewhere."""
    return "linux" if sys.platform.startswith("linux") and os.path.isdir("/proc/self") else "portable"


def _check(value: str, where: str) -> str:
    choice = value.strip().lower() or "auto"
    if choice not in CHOICES:
        raise BackendChoiceError(f"{where}={value!r} is not a process backend (one of "
                                 f"{', '.join(CHOICES)})")
    if choice == "linux" and auto_name() != "linux":
        raise BackendChoiceError(f"{where}=linux needs Linux with /proc; use portable or auto")
    return auto_name() if choice == "auto" else choice


def name() -> str:
    """The backend in force: the environment variable, else the setting, else automatic.
    Raises BackendChoiceError for an unknown or unusable name."""
    forced = os.environ.get(ENV_VAR)
    if forced:
        return _check(forced, ENV_VAR)
    return _check(_configured, "[behaviour] process_backend")


def configure(choice: str) -> None:
    """Apply the ``[behaviour] process_backend`` setting (the environment variable still wins).
    Raises BackendChoiceError, leaving the choice as it was, for a bad value."""
    global _configured
    _check(choice, "[behaviour] process_backend")
    _configured = choice


def problem() -> str | None:
    """The one-line complaint about the backend choice, None when it is fine."""
    try:
        name()
    except BackendChoiceError as exc:
        return str(exc)
    return None


def current() -> ProcessBackend:
    """The backend in force (one instance per name). An unusable choice falls back to the
    automatic one: a stop must still work; ``problem`` says what was wrong."""
    try:
        chosen = name()
    except BackendChoiceError:
        chosen = auto_name()
    found = _instances.get(chosen)
    if found is None:
        if chosen == "linux":
            from tolaria.core.process.linux_backend import LinuxBackend

            found = LinuxBackend()
        else:
            from tolaria.core.process.portable_backend import PortableBackend

            found = PortableBackend()
        _instances[chosen] = found
    return found
