"""Keep one known-harmless failure of the ACP SDK out of the log, and only that one.

claude-agent-acp sends ``usage_update`` notifications with ``"used": null`` (its context count
is not known yet). The SDK's pydantic model requires an integer, so it rejects the whole
notification and logs the ``ValidationError`` with a full traceback at ERROR level, for every
such notification, on the *root* logger (``logging.exception``; the SDK has no logger of its
own to filter). Such a notification never reaches the turn (its cost is not shown; the turn's
token usage still comes with the prompt's result). The filter drops exactly those records: an
error logged from the SDK's own code while handling a ``session/update`` notification whose
every validation error is a null (or missing) ``used`` or ``size`` of a ``usage_update``.
Every other error still reaches the log.
"""

from __future__ import annotations

import logging
import os
from typing import Any

_NOTIFICATION_ERROR = "Unhandled error while handling notification method=%s"
_installed: list[logging.Filter] = []


class NullUsageFilter(logging.Filter):
    """Drops the SDK's error record for a ``usage_update`` with a null ``used``/``size``."""

    def __init__(self, sdk_dir: str) -> None:
        super().__init__()
        self.sdk_dir = sdk_dir

    def filter(self, record: logging.LogRecord) -> bool:
        return not is_null_usage_error(record, self.sdk_dir)


def is_null_usage_error(record: logging.LogRecord, sdk_dir: str) -> bool:
    if record.msg != _NOTIFICATION_ERROR or record.args != ("session/update",):
        return False
    if not os.path.realpath(record.pathname).startswith(sdk_dir + os.sep):
        return False
    exc = record.exc_info[1] if record.exc_info else None
    errors_of = getattr(exc, "errors", None)
    if exc is None or type(exc).__name__ != "ValidationError" or not callable(errors_of):
        return False
    try:
        errors: list[dict[str, Any]] = list(errors_of())
    except Exception:
        return False
    return bool(errors) and all(_is_null_usage(error) for error in errors)


def _is_null_usage(error: dict[str, Any]) -> bool:
    loc = tuple(error.get("loc") or ())
    return ("usage_update" in loc and loc[-1] in ("used", "size")
            and (error.get("input") is None or error.get("type") == "missing"))


def quiet_null_usage_errors() -> None:
    """Install the filter on the root logger (once per process; idempotent)."""
    if _installed:
        return
    try:
        import acp
    except ImportError:
        return
    sdk_dir = os.path.realpath(os.path.dirname(acp.__file__))
    noise = NullUsageFilter(sdk_dir)
    logging.getLogger().addFilter(noise)
    _installed.append(noise)
