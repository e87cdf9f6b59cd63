"""The stream gate: which events of a run still reach the store and the front end.

One rule for the window and ``tolaria run``: the gate forwards events only for streams it has
opened and not yet seen finish, and once a stop was requested through it (``stop``,
``stop_all``, ``mark_stopping``) it forwards no more conversation content (text, thinking,
tools) of that stream, only what explains the ending (errors, diagnostics, usage) and the final
``Done``. A stop that comes too late (the agent already ended by itself: only its pipes are
draining) releases the stream again, so the tail of the answer is kept.

Each forwarded event is first ``record``-ed (the store's ``append_event``), then handed on.
With ``batch`` (the window), events are forwarded once per event-loop turn (``schedule`` asks
for a ``flush``), consecutive text (or thinking) deltas merged into one event: a flood costs one
signal per read of the agent's pipe instead of one per line. Order is kept, and a pending batch
is always flushed before ``stopping`` and ``finished``. ``tolaria run`` batches the same way in
its text modes (``batch_with``: the store and the printer take one merged delta per read
instead of one call each per line, docs/adr/0025-cli-gate-batches-per-loop-turn.md); with
``--json`` each event goes straight through, one line each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tolaria.core.events import (
    Done,
    Event,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    ToolUpdate,
)

OPEN = "open"
STOPPING = "stopping"
#: What a stopped run may no longer say: the rest is the agent talking after the user said stop.
_CONTENT = (TextDelta, ThinkingDelta, ToolStart, ToolUpdate, ToolDone)
_DELTAS = (TextDelta, ThinkingDelta)
#: A merged delta is cut at about this many characters (views chunk their text anyway).
_MERGE_LIMIT = 256 * 1024


class _Merged:
    """Consecutive deltas of one kind, joined once when the batch is flushed."""

    __slots__ = ("cls", "parts", "size", "stream_id")

    def __init__(self, event: TextDelta | ThinkingDelta) -> None:
        self.cls = type(event)
        self.stream_id = event.stream_id
        self.parts = [event.text]
        self.size = len(event.text)

    def event(self) -> Event:
        return self.cls(self.stream_id, text="".join(self.parts))


def _ignore(*_args: object) -> None:
    return None


class StreamGate:
    """The gate of every run of one front end (see the module docstring)."""

    def __init__(self, *, batch: bool = False,
                 schedule: Callable[[], object] | None = None) -> None:
        self._batch = batch
        self._schedule = schedule
        self._scheduled = False
        self._streams: dict[str, str] = {}
        self._pending: dict[str, list[Event | _Merged]] = {}
        #: Called with each forwarded event (``Done`` included) before it is handed on.
        self.record: Callable[[Event], None] | None = None
        #: Where forwarded events (never a ``Done``) go.
        self.on_event: Callable[[Event], None] = _ignore
        #: A stop of this stream took: stream_id.
        self.on_stopping: Callable[[str], None] = _ignore
        #: The stream's ``Done`` passed (nothing of it follows): stream_id, Done.
        self.on_finished: Callable[[str, Done], None] = _ignore

    def batch_with(self, schedule: Callable[[], object]) -> None:
        """Batch from now on (see the module docstring): ``schedule`` must have ``flush``
        called soon, once per call (e.g. ``loop.call_soon``)."""
        self._batch = True
        self._schedule = schedule

    def open_stream(self, stream_id: str) -> Callable[[Event], None]:
        """Start accepting events of ``stream_id``; returns the callback for the runner."""
        self._streams[stream_id] = OPEN
        return self.deliver

    def is_live(self, stream_id: str) -> bool:
        return stream_id in self._streams

    def is_open(self, stream_id: str) -> bool:
        """Live and not stopping: a question may still be asked in its name."""
        return self._streams.get(stream_id) == OPEN

    def mark_stopping(self, stream_id: str) -> bool:
        """Stop forwarding content of ``stream_id``; False if the stream is not live."""
        if not self.hold(stream_id):
            return False
        self.on_stopping(stream_id)
        return True

    def stop(self, stream_id: str, abort: Callable[[], bool]) -> bool:
        """Run ``abort`` (the registry's) with ``stream_id``'s content held back, and keep it
        held (``on_stopping``) only if the abort took effect. Held during the call, so nothing
        the run says after the stop is shown either way."""
        held = self.hold(stream_id)
        took = False
        try:
            took = abort()
        finally:
            if held and not took:
                self.release(stream_id)
        if held and took and self._streams.get(stream_id) == STOPPING:
            self.on_stopping(stream_id)
        return took

    def stop_all(self, stream_ids: Iterable[str],
                 abort_all: Callable[[], list[str]]) -> list[str]:
        """``stop`` for many streams at once: the aborted ones say "stopping", the others
        (already finishing by themselves) are forwarded again, their tails kept."""
        held = [stream_id for stream_id in stream_ids if self.hold(stream_id)]
        aborted: list[str] = []
        try:
            aborted = abort_all()
        finally:
            for stream_id in held:
                if stream_id in aborted:
                    self.on_stopping(stream_id)
                else:
                    self.release(stream_id)
        return aborted

    def forget(self, stream_id: str) -> None:
        """Pass on what ``stream_id`` said so far, then nothing more of it, not even its
        ``Done`` (a run let go at quit: its stored turn stays running; ADR 0032)."""
        self.flush_stream(stream_id)
        self._streams.pop(stream_id, None)

    def hold(self, stream_id: str) -> bool:
        """Stop forwarding content of ``stream_id`` without telling anyone yet; False if the
        stream is not open."""
        if self._streams.get(stream_id) != OPEN:
            return False
        self.flush_stream(stream_id)  # what arrived before the stop is still shown
        self._streams[stream_id] = STOPPING
        return True

    def release(self, stream_id: str) -> None:
        """Forward ``stream_id``'s content again after ``hold``: its stop did not take."""
        if self._streams.get(stream_id) == STOPPING:
            self._streams[stream_id] = OPEN

    def deliver(self, event: Event) -> None:
        """The runner's ``on_event``: filter, record, batch or hand on. On the loop thread."""
        stream_id = event.stream_id
        state = self._streams.get(stream_id)
        if state is None:
            return  # late: the stream finished (or was never opened here)
        if isinstance(event, Done):
            self.flush_stream(stream_id)
            del self._streams[stream_id]
            if self.record is not None:
                self.record(event)
            self.on_finished(stream_id, event)
            return
        if state == STOPPING and isinstance(event, _CONTENT):
            return
        if not self._batch:
            if self.record is not None:
                self.record(event)
            self.on_event(event)
            return
        batch = self._pending.setdefault(stream_id, [])
        last = batch[-1] if batch else None
        if isinstance(event, _DELTAS):
            if isinstance(last, _Merged) and last.cls is type(event) and last.size < _MERGE_LIMIT:
                last.parts.append(event.text)
                last.size += len(event.text)
            else:
                batch.append(_Merged(event))
        else:
            batch.append(event)
        if not self._scheduled and self._schedule is not None:
            self._scheduled = True
            self._schedule()

    def flush(self) -> None:
        """Hand on every pending batch now (normally once per event-loop turn)."""
        self._scheduled = False
        for stream_id in list(self._pending):
            self.flush_stream(stream_id)

    def flush_stream(self, stream_id: str) -> None:
        batch = self._pending.pop(stream_id, None)
        for item in batch or ():
            event = item.event() if isinstance(item, _Merged) else item
            if self.record is not None:
                self.record(event)
            self.on_event(event)
