"""Shared plumbing for JSON-lines dialects: one JSON object per stdout line.

Anything that is not a JSON object, or an object whose fields have unexpected types, becomes a
``Diagnostic`` naming the line: a parser never raises on what an agent prints.
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Callable
from typing import Any

from tolaria.core.events import Diagnostic, Event
from tolaria.core.runtimes.base import Runtime

_PREVIEW = 200
#: ``json.loads``' own scanner, called directly: ``loads`` adds two regex matches and three
#: Python calls around it, a quarter of the cost of a short line.
_SCAN: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    json.JSONDecoder())  # type: ignore[arg-type]  # (the stubs name the class as its argument)


def preview(line: str) -> str:
    return line if len(line) <= _PREVIEW else line[:_PREVIEW] + f"... ({len(line)} chars)"


def int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def as_dict(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{what} is not an object")
    return value


class JsonLinesRuntime(Runtime):
    """Subclasses implement ``dispatch(data)`` for one decoded JSON object."""

    def feed(self, line: str) -> list[Event]:
        stripped = line.strip()
        if not stripped:
            return []
        try:
            # Exactly json.loads(stripped): no whitespace is left at either end to skip, and
            # anything after the value is an error ("Extra data").
            data, end = _SCAN(stripped, 0)
        except (StopIteration, json.JSONDecodeError, RecursionError):
            end = -1
        if end != len(stripped):
            return [self.diag(f"ignored non-JSON line: {preview(stripped)}")]
        if not isinstance(data, dict):
            return [self.diag(f"ignored JSON that is not an object: {preview(stripped)}")]
        try:
            events = self.dispatch(data)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            return [self.diag(f"ignored malformed {data.get('type')!r} event ({exc}): "
                              f"{preview(stripped)}")]
        self.note_progress(events)
        return events

    def dispatch(self, data: dict[str, Any]) -> list[Event]:
        raise NotImplementedError

    def diag(self, message: str) -> Diagnostic:
        return Diagnostic(self.stream_id, source="stdout", message=message)
