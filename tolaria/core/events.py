"""The events a run emits, as frozen dataclasses. See docs/adr/0003-event-model.md.

Every event carries the ``stream_id`` of its run. A run emits exactly one ``Done``, always last;
nothing of that stream is emitted after it. ``to_dict``/``event_from_dict`` give the JSON form
used by ``tolaria run --json``, the control socket and the conversation store.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tolaria.support.redact import redact_text


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str] = "event"
    stream_id: str


@dataclass(frozen=True)
class Init(Event):
    """The agent started and told us its session id (``None`` when it has none)."""

    kind: ClassVar[str] = "init"
    agent: str = ""
    session_id: str | None = None


@dataclass(frozen=True)
class TextDelta(Event):
    kind: ClassVar[str] = "text_delta"
    text: str = ""


@dataclass(frozen=True)
class ThinkingDelta(Event):
    kind: ClassVar[str] = "thinking_delta"
    text: str = ""


@dataclass(frozen=True)
class ToolStart(Event):
    kind: ClassVar[str] = "tool_start"
    tool_id: str = ""
    name: str = ""
    input: Any = None
    #: The MCP server whose tool this is ("" for the agent's own tools); ``name`` then shows
    #: it too ("<server> · <tool>", tolaria/core/mcp/toolnames.py).
    server: str = ""


@dataclass(frozen=True)
class ToolDone(Event):
    kind: ClassVar[str] = "tool_done"
    tool_id: str = ""
    output: str = ""
    is_error: bool = False


@dataclass(frozen=True)
class ToolUpdate(Event):
    """A running tool call changed before its result: fields left None did not change.

    ``status`` is "pending" (not started yet: its input is still streaming, or it awaits
    approval) or "running"; ``output`` is the output so far (it replaces what came before).
    """

    kind: ClassVar[str] = "tool_update"
    tool_id: str = ""
    name: str | None = None
    input: Any = None
    status: str | None = None
    output: str | None = None


@dataclass(frozen=True)
class Usage(Event):
    """The turn's usage so far, as the agent reports it: each one replaces the one before (the
    last is the turn's; fields left None are not known, and keep what was known).

    ``cache_read_tokens``/``cache_write_tokens``: prompt tokens read from or written to the
    model's cache (Claude reports them beside ``input_tokens``; Codex's cached tokens are part
    of its ``input_tokens``). ``context_tokens`` of ``context_window``: how full the model's
    context was at the turn's last request, where the agent says. ``rate_limits``: the plan's
    limits as the CLI last reported them, in the form of tolaria/core/ratelimits.py (a list of
    windows), or None.
    """

    kind: ClassVar[str] = "usage"
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    context_tokens: int | None = None
    context_window: int | None = None
    rate_limits: Any = None


@dataclass(frozen=True)
class Diagnostic(Event):
    """Something that is not conversation: a stderr line, a non-JSON stdout line, a note.

    ``source`` says where it came from, e.g. ``stderr``, ``stdout`` (a line the parser could not
    use), ``tolaria`` (a note from Tolaria), ``acp``, or ``retry`` (the agent started or stopped
    retrying its model requests; the chat shows these).
    """

    kind: ClassVar[str] = "diagnostic"
    source: str = "stderr"
    message: str = ""


@dataclass(frozen=True)
class Error(Event):
    """The agent (or Tolaria on its behalf) reports a failure the user must see.

    ``message`` is the raw text (the agent's own words). ``category`` (one of
    ``tolaria.core.turns.diagnose.CATEGORIES``) and ``hint`` (one actionable line naming the agent)
    are empty when nothing better than the raw text is known, and in events stored before
    they existed.
    """

    kind: ClassVar[str] = "error"
    message: str = ""
    category: str = ""
    hint: str = ""


@dataclass(frozen=True)
class Survivor:
    """A process of the run still alive after the stop gave up on it."""

    pid: int
    name: str


@dataclass(frozen=True)
class Done(Event):
    """The one terminal event of a run, always last."""

    kind: ClassVar[str] = "done"
    stop_reason: str = "end_turn"
    exit_code: int | None = None
    #: None: not measured (an imported turn the CLI did not time-stamp).
    duration_ms: int | None = 0
    survivors: tuple[Survivor, ...] = field(default_factory=tuple)
    #: The limit that stopped the run (tolaria/core/limits.py: time, cost, tokens, tool_calls)
    #: and its value; None for every other end, a user's Stop included.
    limit: str | None = None
    limit_value: float | None = None


@dataclass(frozen=True)
class PermissionAsked(Event):
    """A question the user must answer before a tool runs (tolaria/core/permissions.py), kept
    with its turn while it is open so that every view built later shows it again. ``key``
    names the question within its stream; ``choices`` are ``{"option_id", "name", "kind"}``;
    ``tool_kind`` is the tool's kind (ACP ``execute``, ``edit``...), "" when not said."""

    kind: ClassVar[str] = "permission_asked"
    key: str = ""
    tool_id: str = ""
    title: str = ""
    input: Any = None
    choices: tuple[dict[str, str], ...] = ()
    tool_kind: str = ""


@dataclass(frozen=True)
class PermissionSettled(Event):
    """How a ``PermissionAsked`` question ended: ``outcome`` is allow_once, allow_always,
    reject, remembered or cancelled (tolaria/qt/permissions.py)."""

    kind: ClassVar[str] = "permission_settled"
    key: str = ""
    outcome: str = ""


@dataclass(frozen=True)
class Attached(Event):
    """A file of the turn went to the agent: ``form`` says how (tolaria/core/attachments/forms.py:
    ``claude-blocks``, ``args``, ``at-path``, ``path``...), ``how`` in words; ``note``: what the
    agent may still do with it (a CLI that sends images only for models it believes can see)."""

    kind: ClassVar[str] = "attached"
    name: str = ""
    size: int = 0
    mime: str = ""
    sha256: str = ""
    form: str = ""
    how: str = ""
    note: str = ""


@dataclass(frozen=True)
class AgentCommands(Event):
    """The slash commands the agent offers now (ACP ``available_commands_update``), each a
    ``{"name", "description", "hint"}`` dict: the composer's ``/`` menu lists them."""

    kind: ClassVar[str] = "agent_commands"
    commands: tuple[dict[str, str], ...] = ()


STOP_END_TURN = "end_turn"
STOP_CANCELLED = "cancelled"
STOP_ERROR = "error"
STOP_MAX_ITERATIONS = "max_iterations"

EventCallback = Callable[[Event], None]

EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (Init, TextDelta, ThinkingDelta, ToolStart, ToolDone, Usage, Diagnostic, Error, Done,
                ToolUpdate, PermissionAsked, PermissionSettled, Attached, AgentCommands)
}


#: The events ``redacted`` masks (a type check: it runs for every event of a flood).
_REDACTED = frozenset((Error, Diagnostic))


def text_delta(stream_id: str, text: str) -> TextDelta:
    """``TextDelta(stream_id, text=text)``, made without the frozen dataclass's ``__init__``
    (an ``object.__setattr__`` call per field): the same value, a third of the cost, for the
    flood of deltas an agent prints (one per line)."""
    event = _new(TextDelta)
    event.__dict__.update(stream_id=stream_id, text=text)
    return event


_new = object.__new__


def redacted(event: Event) -> Event:
    """``event`` with secrets masked where a run reports trouble: errors, stderr lines and other
    diagnostics (an agent's failure text may quote its environment or its key), by the one
    policy of tolaria/support/redact.py. Conversation events stay as the agent sent them:
    masking a file the agent read would make it write the mask back."""
    if type(event) in _REDACTED and isinstance(event, Error | Diagnostic):
        message = redact_text(event.message)
        if message != event.message:
            return dataclasses.replace(event, message=message)
    return event


#: Each event class's own fields, in order (``dataclasses.fields`` is slow to ask per event).
_FIELDS: dict[type[Event], tuple[str, ...]] = {}


#: Each event class's field names, ``stream_id`` included (read back by ``event_from_dict``).
_ALL_FIELDS: dict[type[Event], frozenset[str]] = {}


def _field_names(cls: type[Event]) -> tuple[str, ...]:
    names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls)
                                 if f.name != "stream_id")
    return names


def to_dict(event: Event) -> dict[str, Any]:
    """JSON-ready dict: ``stream_id``, ``kind`` and the event's own fields."""
    out: dict[str, Any] = {"stream_id": event.stream_id, "kind": event.kind}
    cls = type(event)
    for name in _FIELDS.get(cls) or _field_names(cls):
        value = getattr(event, name)
        if name == "survivors":
            value = [{"pid": s.pid, "name": s.name} for s in value]
        out[name] = value
    return out


def event_from_dict(data: dict[str, Any]) -> Event:
    """Inverse of ``to_dict``; raises ValueError on an unknown kind or bad fields."""
    kind = data.get("kind")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    names = _ALL_FIELDS.get(cls)
    if names is None:
        names = _ALL_FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    kwargs = {k: v for k, v in data.items() if k in names}
    if cls is PermissionAsked:
        kwargs["choices"] = tuple(
            {k: str(v) for k, v in dict(c).items()} for c in kwargs.get("choices", ()))
    if cls is AgentCommands:
        kwargs["commands"] = tuple(
            {k: str(v) for k, v in dict(c).items()} for c in kwargs.get("commands", ()))
    if cls is Done:
        kwargs["survivors"] = tuple(
            Survivor(pid=int(s["pid"]), name=str(s["name"])) for s in kwargs.get("survivors", ())
        )
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"bad {kind} event: {exc}") from exc


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def summarize_tool_input(value: object, limit: int = 100) -> str:
    """One line saying what a tool was asked to do (its command, path, pattern...): the window's
    tool card and ``tolaria run``'s tool lines show the same."""
    if isinstance(value, dict):
        for key in ("command", "cmd", "description", "file_path", "path", "pattern", "query",
                    "url", "prompt"):
            if isinstance(value.get(key), str) and value[key].strip():
                return _one_line(value[key], limit)
        if isinstance(value.get("command"), list):  # argv form (Codex)
            return _one_line(" ".join(map(str, value["command"])), limit)
    if value is None or value == {}:
        return ""
    return _one_line(json.dumps(value, ensure_ascii=False, default=str), limit)
    if value is None or value == {}:
        return ""
    line = json.dumps(value, ensure_ascii=False, default=str)
    return line if len(line) <= limit else line[: limit - 1] + "…"
