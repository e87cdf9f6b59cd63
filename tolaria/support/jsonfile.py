"""Reading the app's small JSON state files (drafts, the window's state): a missing file is
empty, an unreadable one is logged, and one that does not parse is set aside as ``NAME.bad``
(never written over: the user may want it back) and read as empty."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


def read_or_set_aside(path: Path, what: str, parse: Callable[[Any], T], empty: T) -> T:
    """``parse`` of ``path``'s JSON; ``empty`` when it is missing, unreadable or not ``what``
    (``parse`` raising ValueError, KeyError, TypeError or AttributeError: set aside)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return empty
    except OSError as exc:
        log.warning("could not read %s: %s", path, exc)
        return empty
    try:
        return parse(json.loads(raw))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("%s is not %s (%s): set aside", path, what, exc)
        with contextlib.suppress(OSError):
            os.replace(path, path.with_name(path.name + ".bad"))
        return empty
