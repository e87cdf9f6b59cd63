"""Per-turn output caps: how much of what a run prints is kept (stored and shown).

An agent may print without end (a 1 GB flood, a tool that dumps a log, stderr in a loop). The core
streams it with bounded memory (tolaria/core/linereader.py), but the store and the transcript keep
what they are given, so the same policy, ``OutputCap``, is applied to a turn's events by both the
store (tolaria/core/store/db.py) and the turn view (tolaria/ui/transcript/turn_view.py): they keep the same
things and show the same notice. See docs/RELIABILITY.md, section 6.

- One budget per turn, ``turn_chars`` (32 Mi characters), shared by answer text, thinking, tool
  inputs and outputs, and diagnostic messages (stderr lines, notes). The START is kept: once the
  budget is spent, text, thinking and diagnostics are dropped (counted), a tool update loses its
  output (None: unchanged), a tool result's output becomes a one-line note, and one notice (a
  ``Diagnostic`` with source ``cap``) says so where it happened.
- One item, ``item_chars`` (1 Mi characters): a single tool output, tool input, diagnostic or
  error message longer than that keeps its start and its last part, with a marker in between.
- The END of the answer is kept too: the last ``tail_chars`` (64 Ki characters) of the text that
  was not kept, added when the turn ends (a second ``cap`` notice, then the text).

Errors, tool starts and results, usage, init and done events are always kept (their large fields
clipped), so a capped turn still shows its tool cards and how it ended. The caps count characters
(what Python's ``len`` counts), not bytes. A restored turn was capped when it was stored: once a
``cap`` notice is seen, the rest of the turn passes unchanged.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace

from tolaria.core.events import (
    Diagnostic,
    Error,
    Event,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    ToolUpdate,
)

log = logging.getLogger(__name__)

#: ``Diagnostic.source`` of the notices the cap adds.
CAP_SOURCE = "cap"
MIB = 1024 * 1024
TURN_CHARS = 32 * MIB
ITEM_CHARS = 1 * MIB
TAIL_CHARS = 64 * 1024
#: Environment variables that change the caps (characters; tests and benches use small ones).
ENV_TURN, ENV_ITEM, ENV_TAIL = "TOLARIA_MAX_TURN_CHARS", "TOLARIA_MAX_ITEM_CHARS", \
    "TOLARIA_TAIL_CHARS"
_DELTAS = (TextDelta, ThinkingDelta)
#: What an over-budget field is clipped to when its event is kept anyway (errors, tool inputs).
_SMALL = 4096


def human_size(chars: int) -> str:
    if chars < 1024:
        return f"{chars} characters"
    if chars < MIB:
        return f"{chars / 1024:.0f} KB"
    return f"{chars / MIB:.1f} MB".replace(".0 MB", " MB")


@dataclass(frozen=True)
class OutputLimits:
    turn_chars: int = TURN_CHARS
    item_chars: int = ITEM_CHARS
    tail_chars: int = TAIL_CHARS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OutputLimits:
        """The defaults, changed by ``TOLARIA_MAX_TURN_CHARS`` / ``_ITEM_CHARS`` /
        ``TOLARIA_TAIL_CHARS`` (a bad value is logged and ignored)."""
        env = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for name, field in ((ENV_TURN, "turn_chars"), (ENV_ITEM, "item_chars"),
                            (ENV_TAIL, "tail_chars")):
            raw = env.get(name)
            if raw is None:
                continue
            try:
                value = int(raw)
                if value < (0 if field == "tail_chars" else 1):
                    raise ValueError("too small")
            except ValueError:
                log.warning("ignoring %s=%r: expected a positive number of characters", name, raw)
                continue
            values[field] = value
        return cls(**values)


def clip_item(text: str, limit: int, tail: int = TAIL_CHARS) -> str:
    """``text`` if it fits in ``limit``, else its start and end around a marker line."""
    if len(text) <= limit:
        return text
    end = min(tail, limit // 4)
    return (text[: limit - end] + f"\n… [{human_size(len(text) - limit)} not kept: longer than "
            f"{human_size(limit)}] …\n" + (text[-end:] if end else ""))


class OutputCap:
    """Applies ``OutputLimits`` to the events of one turn, in order. Not thread-safe."""

    def __init__(self, limits: OutputLimits | None = None) -> None:
        self.limits = limits if limits is not None else OutputLimits()
        #: Characters of content kept, and not kept, so far.
        self.kept = 0
        self.dropped = 0
        #: The budget was spent (a notice went out, or came in with a restored turn).
        self.truncated = False
        #: The events were capped before (a restored turn): they pass unchanged.
        self.upstream = False
        self._tail: deque[str] = deque()
        self._tail_size = 0

    @property
    def room(self) -> int:
        return max(0, self.limits.turn_chars - self.kept)

    def notice_text(self) -> str:
        return (f"Output truncated: this turn printed more than "
                f"{human_size(self.limits.turn_chars)}; the rest was not kept (the agent kept "
                "running; Stop ends it).")

    def feed(self, event: Event) -> list[Event]:
        """What to keep of ``event`` (possibly nothing), with a notice the first time the budget
        runs out."""
        if self.upstream:
            return [event]
        if isinstance(event, _DELTAS):  # first: most of a flood
            return self._delta(event)
        if isinstance(event, Diagnostic) and event.source == CAP_SOURCE:
            self.upstream = self.truncated = True
            return [event]
        if isinstance(event, ToolUpdate) and event.output is not None:
            output = clip_item(event.output, self.limits.item_chars, self.limits.tail_chars)
            if len(output) > self.room:
                return self._drop(event.stream_id, replace(event, output=None), len(event.output))
            self.kept += len(output)
            return [replace(event, output=output)] if output is not event.output else [event]
        if isinstance(event, ToolDone):
            output = clip_item(event.output, self.limits.item_chars, self.limits.tail_chars)
            if len(output) > self.room:
                note = (f"[{human_size(len(event.output))} of output not kept: this turn passed "
                        f"its {human_size(self.limits.turn_chars)} output cap]")
                return self._drop(event.stream_id, replace(event, output=note), len(event.output))
            self.kept += len(output)
            return [replace(event, output=output)] if output is not event.output else [event]
        if isinstance(event, ToolStart) and event.input is not None:
            try:
                size = len(json.dumps(event.input, ensure_ascii=False, default=str))
            except (TypeError, ValueError):  # not JSON (the store keeps a note instead)
                return [event]
            if size <= self.limits.item_chars and (size <= self.room or size <= _SMALL):
                self.kept += min(size, self.room)  # (a small input is kept over the budget)
                return [event]
            note = f"(input not kept: {human_size(size)})"
            return self._drop(event.stream_id, replace(event, input=note), size) \
                if size > self.room else \
                [replace(event, input=note)]
        if isinstance(event, Diagnostic):
            message = clip_item(event.message, self.limits.item_chars, self.limits.tail_chars)
            if len(message) > self.room:
                return self._drop(event.stream_id, None, len(event.message))
            self.kept += len(message)
            return [replace(event, message=message)] if message is not event.message else [event]
        if isinstance(event, Error):
            limit = min(self.limits.item_chars, max(self.room, _SMALL))
            message = clip_item(event.message, limit, self.limits.tail_chars)
            self.kept += len(message)
            return [replace(event, message=message)] if message is not event.message else [event]
        return [event]

    def take_delta(self, event: TextDelta | ThinkingDelta) -> bool:
        """True if ``feed(event)`` would keep this delta whole, and counted as ``feed`` would
        (the store's shortcut for most of a flood); False changes nothing: ``feed`` it."""
        if self.upstream:
            return True
        size = len(event.text)
        if size > self.limits.turn_chars - self.kept:
            return False
        self.kept += size
        return True

    def finish(self, stream_id: str) -> list[Event]:
        """The end of the turn: the last part of the answer text that was not kept."""
        if self.upstream or not self._tail:
            return []
        tail = "".join(self._tail)[-self.limits.tail_chars:]
        self._tail.clear()
        self._tail_size = 0
        return [Diagnostic(stream_id, source=CAP_SOURCE,
                           message=f"In all, {human_size(self.dropped)} of output was not kept. "
                                   f"The last {human_size(len(tail))} of the answer:"),
                TextDelta(stream_id, text=tail)]

    def _delta(self, event: TextDelta | ThinkingDelta) -> list[Event]:
        text, room = event.text, self.limits.turn_chars - self.kept
        if room < 0:  # (an error's message may be kept over the budget)
            room = 0
        if len(text) <= room:
            self.kept += len(text)
            return [event]
        head = type(event)(event.stream_id, text=text[:room]) if room else None
        self.kept += room
        if isinstance(event, TextDelta):
            self._add_tail(text, room)
        out = self._drop(event.stream_id, None, len(text) - room)
        return [head, *out] if head is not None else out

    def _drop(self, stream_id: str, kept: Event | None, size: int) -> list[Event]:
        """``size`` characters were not kept; ``kept`` (if any) is what remains of the event."""
        self.dropped += size
        out = [kept] if kept is not None else []
        if not self.truncated:
            self.truncated = True
            out.insert(0, Diagnostic(stream_id, source=CAP_SOURCE, message=self.notice_text()))
        return out

    def _add_tail(self, text: str, start: int) -> None:
        limit = self.limits.tail_chars
        if limit <= 0:
            return
        piece = text[max(start, len(text) - limit):]
        self._tail.append(piece)
        self._tail_size += len(piece)
        while self._tail and self._tail_size - len(self._tail[0]) >= limit:
            self._tail_size -= len(self._tail.popleft())
        # (Whole pieces only: at most 2 x limit is held; finish() cuts the exact tail.)
