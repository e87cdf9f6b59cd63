"""A turn's queue of events waiting to be shown, apart from its widgets.

Events are queued as they arrive (cheap, per event) and taken by the view's ``drain`` a frame at
a time. Consecutive text deltas merge into one queued text; when text arrives faster than it can
be shown, the oldest unseen text is dropped from the queue (and counted as "not shown"). Every
event first goes through the same ``OutputCap`` as in the store (tolaria/core/output_cap.py), so
the view holds a bounded amount and shows the same "Output truncated" notice, live and restored.
"""

from __future__ import annotations

from collections import deque

from tolaria.core.events import (
    Event,
    PermissionAsked,
    PermissionSettled,
    TextDelta,
    ThinkingDelta,
    ToolUpdate,
    Usage,
)
from tolaria.core.output_cap import OutputCap, OutputLimits
from tolaria.core.permissions import PermissionRequest, request_of
from tolaria.ui.transcript.turn_model import (
    MAX_PENDING_TEXT,
    Ending,
    Question,
    QueuedText,
    merge_updates,
)

Item = QueuedText | Event | Ending | Question


class TurnQueue:
    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id
        self.received_chars = 0
        self._queue: deque[Item] = deque()
        self._pending_text = 0
        self._cap = OutputCap(OutputLimits.from_env())
        #: The latest usage the agent reported (kept as it arrives, not when applied).
        self.usage: Usage | None = None
        #: The turn's ending is known (queued or applied): no live event follows.
        self.ended = False

    @property
    def cap(self) -> OutputCap:
        return self._cap

    def __bool__(self) -> bool:
        return bool(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def pending_chars(self) -> int:
        """Characters of text and thinking queued and not shown yet."""
        return sum(item.size for item in self._queue if isinstance(item, QueuedText))

    def first(self) -> Item:
        return self._queue[0]

    def pop(self) -> None:
        self._queue.popleft()

    def take_text(self, item: QueuedText, limit: int) -> str:
        """Up to ``limit`` characters of a queued text (the rest stays queued)."""
        chunk = item.take(limit)
        if item.kind == "text":
            self._pending_text -= len(chunk)
        return chunk

    def enqueue(self, event: Event) -> None:
        if isinstance(event, TextDelta | ThinkingDelta):
            self.received_chars += len(event.text)
        for kept in self._cap.feed(event):
            self._enqueue_kept(kept)

    def _enqueue_kept(self, event: Event) -> None:
        if isinstance(event, TextDelta | ThinkingDelta):
            kind = "text" if isinstance(event, TextDelta) else "thinking"
            last = self._queue[-1] if self._queue else None
            if not (isinstance(last, QueuedText) and last.kind == kind):
                last = QueuedText(kind)
                self._queue.append(last)
            last.parts.append(event.text)
            last.size += len(event.text)
            if kind == "text":
                self._pending_text += len(event.text)
                if self._pending_text > MAX_PENDING_TEXT:
                    self._drop_oldest_text()
            return
        if isinstance(event, PermissionAsked):  # kept with the turn: a rebuilt view asks again
            self._queue.append(Question(event.key, request=request_of(event)))
            return
        if isinstance(event, PermissionSettled):
            self._queue.append(Question(event.key, outcome=event.outcome))
            return
        if isinstance(event, Usage):
            self.usage = event
        if isinstance(event, ToolUpdate) and self._queue:
            last = self._queue[-1]
            if isinstance(last, ToolUpdate) and last.tool_id == event.tool_id:
                self._queue[-1] = merge_updates(last, event)  # a stream of partial output
                return
        self._queue.append(event)

    def end(self, ending: Ending) -> None:
        self.ended = True
        for kept in self._cap.finish(self.stream_id):  # the tail of a capped answer
            self._enqueue_kept(kept)
        self._queue.append(ending)

    def ask(self, key: str, request: PermissionRequest) -> None:
        """A permission question, shown in order with the turn's events."""
        self._queue.append(Question(key, request=request))

    def settle(self, key: str, outcome: str) -> None:
        self._queue.append(Question(key, outcome=outcome))

    def _drop_oldest_text(self) -> None:
        """Drop queued text from the oldest end until half the allowance is left."""
        excess = self._pending_text - MAX_PENDING_TEXT // 2
        for item in self._queue:
            if excess <= 0:
                break
            if not (isinstance(item, QueuedText) and item.kind == "text") or item.size == 0:
                continue
            whole = "".join(item.parts)
            cut = min(excess, len(whole))
            item.parts = [whole[cut:]]
            item.size = len(whole) - cut
            item.dropped += cut
            self._pending_text -= cut
            excess -= cut

