"""Work-arounds for bugs of the Qt binding in the versions we support.

PySide6 6.12.0 on Python 3.11 hands back ``None``, ``True`` and ``False`` from wrapped calls
without taking a reference (every ``label.setText()`` or ``signal.emit()`` drops one), so after
a few thousand calls the interpreter aborts with "Fatal Python error: none_dealloc" (or
bool_dealloc). Python 3.12 made these objects immortal, which hides the bug there. Until the
binding is fixed, we make them practically immortal on 3.11 too: they are never freed anyway.
"""

from __future__ import annotations

import ctypes
import platform
import sys

_BOOST = 1 << 40
_done = False


def protect_singletons() -> None:
    """Idempotent; a no-op where the singletons are already immortal (CPython >= 3.12)."""
    global _done
    if _done or sys.version_info >= (3, 12) or platform.python_implementation() != "CPython":
        return
    _done = True
    for obj in (None, True, False):
        # ob_refcnt is the first field of every CPython object.
        ctypes.c_ssize_t.from_address(id(obj)).value += _BOOST
