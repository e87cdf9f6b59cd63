"""What a turn's view is made of, apart from widgets: statuses, its ending, queued text and
questions, and how durations, usage and status lines read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tolaria.chats.export.words import duration
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_END_TURN,
    STOP_MAX_ITERATIONS,
    Survivor,
    ToolUpdate,
    Usage,
)
from tolaria.core.limits import stopped_text
from tolaria.core.permissions import PermissionRequest
from tolaria.core.store.schema import STOP_NOT_ANSWERED
from tolaria.ui.transcript.blocks import CHUNK_CHARS, MAX_CHUNKS

#: ``Diagnostic.source`` of a note for the user (tolaria.core.modelchat.client.NOTICE), shown in the
#: turn: "<model> does not support tools ...", "Stopped after N tool rounds ...".
NOTICE_SOURCE = "notice"

#: Unseen text kept queued at most; beyond this the oldest queued text is dropped.
MAX_PENDING_TEXT = CHUNK_CHARS * MAX_CHUNKS
STDERR_LINES = 40
#: Characters kept of one stderr line (the start: that is where the message is).
STDERR_LINE_CHARS = 4096

STATUS_RUNNING = "running"
STATUS_COMPLETED = "completed"
STATUS_CANCELLED = "cancelled"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"

STATUS_WORDS = {
    STATUS_COMPLETED: "Completed",
    STATUS_CANCELLED: "Stopped",
    STATUS_FAILED: "Failed",
    STATUS_INTERRUPTED: "Interrupted",
}
#: What a tool without a result became when the turn ended so.
PENDING_TOOL = {STATUS_CANCELLED: "cancelled", STATUS_INTERRUPTED: "interrupted"}


def merge_updates(older: ToolUpdate, newer: ToolUpdate) -> ToolUpdate:
    """Two queued updates of one tool as one: what the newer one changed wins."""
    return ToolUpdate(newer.stream_id, tool_id=newer.tool_id,
                      name=newer.name if newer.name is not None else older.name,
                      input=newer.input if newer.input is not None else older.input,
                      status=newer.status if newer.status is not None else older.status,
                      output=newer.output if newer.output is not None else older.output)


def status_from_stop_reason(stop_reason: str) -> str:
    if stop_reason == STOP_END_TURN:
        return STATUS_COMPLETED
    if stop_reason == STOP_CANCELLED:
        return STATUS_CANCELLED
    return STATUS_FAILED


def format_duration(ms: int | None) -> str:
    """"2.1 s", "3 min 05 s": as the chat export writes it."""
    return duration(ms)


def format_usage(input_tokens: int | None, output_tokens: int | None,
                 cost_usd: float | None) -> str:
    parts = []
    if input_tokens is not None or output_tokens is not None:
        parts.append(f"{input_tokens or 0:,} in / {output_tokens or 0:,} out tokens")
    if cost_usd is not None:
        parts.append(f"${cost_usd:.4f}")
    return " · ".join(parts)


@dataclass
class QueuedText:
    kind: str  # "text" | "thinking"
    parts: list[str] = field(default_factory=list)
    size: int = 0
    dropped: int = 0

    def take(self, limit: int) -> str:
        whole = "".join(self.parts)
        head, rest = whole[:limit], whole[limit:]
        self.parts = [rest] if rest else []
        self.size = len(rest)
        return head


@dataclass(frozen=True)
class Question:
    """A permission question (``request`` set) or how one ended (``outcome`` set)."""

    key: str
    request: PermissionRequest | None = None
    outcome: str | None = None


@dataclass(frozen=True)
class Ending:
    status: str
    duration_ms: int | None = None
    survivors: Sequence[Survivor] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    #: The run's ``done`` stop reason, when known (it refines a failed status).
    stop_reason: str | None = None
    #: The limit that stopped the run and its value (``Done.limit``), if one did.
    limit: str | None = None
    limit_value: float | None = None

    @property
    def limit_words(self) -> str | None:
        """"Stopped: $2.00 limit reached" for a run a limit stopped, else None."""
        if self.limit is None or self.status != STATUS_CANCELLED:
            return None
        text = stopped_text(self.limit, self.limit_value)
        return text[0].upper() + text[1:]


def ending_line(ending: Ending) -> tuple[str, str]:
    """(status line, tone) of an ended turn."""
    words = STATUS_WORDS.get(ending.status, ending.status.capitalize())
    duration = format_duration(ending.duration_ms)
    limit = ending.stop_reason == STOP_MAX_ITERATIONS
    if ending.status == STATUS_INTERRUPTED and ending.stop_reason == STOP_NOT_ANSWERED:
        # Imported: stopped in the CLI, or still being written (a later import completes it).
        line = "Interrupted: no answer in the CLI's session yet"
    elif ending.status == STATUS_INTERRUPTED:
        line = "Interrupted: Tolaria closed while this turn was running"
    elif ending.limit_words is not None:
        line = ending.limit_words + (f" after {duration}" if duration else "")
    elif limit:  # not a failure: the model goes on when asked (the notice above says so)
        line = "Stopped at the tool-round limit (max_iterations)"
        line += f" after {duration}" if duration else ""
    elif ending.status == STATUS_COMPLETED:
        line = f"{words} in {duration}" if duration else words
    else:
        line = f"{words} after {duration}" if duration else words
    tone = "warning" if limit or ending.status in (STATUS_CANCELLED, STATUS_INTERRUPTED) \
        else "error" if ending.status == STATUS_FAILED else "muted"
    return line, tone


def ending_summary(ending: Ending, usage: Usage | None = None) -> str:
    """The status line's words for an ended turn: "Completed · 2.1 s · 1.2k in / 80 out"
    (``usage``: what the turn reported, where the ending itself has no numbers)."""
    words = STATUS_WORDS.get(ending.status, ending.status)
    if ending.stop_reason == STOP_MAX_ITERATIONS:
        words = "Stopped at the tool-round limit"
    words = ending.limit_words or words
    parts = [words]
    if ending.duration_ms is not None:
        parts.append(format_duration(ending.duration_ms))
    numbers = format_usage(
        ending.input_tokens if ending.input_tokens is not None else
        (usage.input_tokens if usage else None),
        ending.output_tokens if ending.output_tokens is not None else
        (usage.output_tokens if usage else None),
        ending.cost_usd if ending.cost_usd is not None else (usage.cost_usd if usage else None))
    if numbers:
        parts.append(numbers)
    return " · ".join(parts)
