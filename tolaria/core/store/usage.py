"""Usage totals: tokens, cost and agent time per chat, per day and per agent, by SQL.

A turn's row holds its usage as its agent last reported it (the store's buffer applies every
``Usage`` event to the row, and each one is the turn's whole usage so far: a Claude turn's
per-message figures are replaced by its result's total). So the totals are sums over turn
rows, never over events: nothing is counted twice, and 20,000 turns sum in milliseconds with
no summary table to keep right (``turns_by_start`` serves ``since``; docs/adr/0031).

Agent time is the wall time of the runs (``duration_ms`` of their ``Done``; a turn left
running counts from its start to its last event's time, or not at all). A day is a local
calendar day of the turn's start.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tolaria.core.events import Usage
from tolaria.core.store.parts import StorePart

BY_CHAT, BY_DAY, BY_AGENT = "chat", "day", "agent"
GROUPINGS = (BY_CHAT, BY_DAY, BY_AGENT)

_KEYS = {
    BY_CHAT: "t.conversation_id",
    BY_DAY: "date(t.started_at, 'unixepoch', 'localtime')",
    BY_AGENT: "t.agent",
}
_SUMS = ("COUNT(*), SUM(t.input_tokens), SUM(t.output_tokens), SUM(t.cache_read_tokens),"
         " SUM(t.cache_write_tokens), SUM(t.cost_usd), COUNT(t.cost_usd),"
         " SUM(COALESCE(t.duration_ms, CAST((t.finished_at - t.started_at) * 1000 AS INTEGER)))")


@dataclass(frozen=True)
class UsageRow:
    """The totals of one chat, day or agent (or of everything: ``key`` None)."""

    key: str | int | None
    #: What the row is called: the chat's title, the day (YYYY-MM-DD), the agent's id.
    label: str
    turns: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    #: None when no turn of the row reported a cost (shown "—", not $0).
    cost_usd: float | None
    #: Turns whose agent reported a cost.
    costed_turns: int
    #: Wall time of the runs, in milliseconds.
    agent_ms: int
    #: The agent of a chat row (its current one); "" for other rows.
    agent: str = ""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "agent": self.agent, "turns": self.turns,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens, "cost_usd": self.cost_usd,
                "costed_turns": self.costed_turns, "agent_seconds": self.agent_ms / 1000}


@dataclass(frozen=True)
class DayAgent:
    """One agent's tokens, cost and time on one day: a bar segment of the Usage page's chart."""

    day: str
    agent: str
    tokens: int
    cost_usd: float | None
    agent_ms: int


@dataclass(frozen=True)
class ContextState:
    """How full the model's context was at a turn's end, and what the plan's limits were."""

    agent: str
    turn_id: int
    context_tokens: int | None
    context_window: int | None
    #: tolaria/core/ratelimits.py windows, or None.
    rate_limits: list[dict[str, Any]] | None
    at: float

    @property
    def fraction(self) -> float | None:
        if not self.context_tokens or not self.context_window:
            return None
        return min(1.0, self.context_tokens / self.context_window)


def apply_usage_extras(execute: Callable[..., Any], event: Usage, turn_id: int) -> None:
    """The usage beyond tokens and cost onto the turn's row (in the buffer's transaction)."""
    if (event.cache_read_tokens is None and event.cache_write_tokens is None
            and event.context_tokens is None and event.context_window is None
            and event.rate_limits is None):
        return
    limits = json.dumps(event.rate_limits) if event.rate_limits is not None else None
    execute(
        "UPDATE turns SET cache_read_tokens = COALESCE(?, cache_read_tokens),"
        " cache_write_tokens = COALESCE(?, cache_write_tokens),"
        " context_tokens = COALESCE(?, context_tokens),"
        " context_window = COALESCE(?, context_window),"
        " rate_limits = COALESCE(?, rate_limits) WHERE id = ?",
        (event.cache_read_tokens, event.cache_write_tokens, event.context_tokens,
         event.context_window, limits, turn_id),
    )


def _row(key: Any, label: str, values: tuple[Any, ...], agent: str = "") -> UsageRow:
    turns, inp, out, read, write, cost, costed, ms = values
    return UsageRow(key, label, int(turns or 0), int(inp or 0), int(out or 0), int(read or 0),
                    int(write or 0), float(cost) if costed else None, int(costed or 0),
                    int(ms or 0), agent)


class UsageLog(StorePart):
    """Mixed into ``Store``: the usage queries."""

    def usage(self, by: str, since: float | None = None,
              until: float | None = None) -> list[UsageRow]:
        """Totals per chat, day or agent of the turns started in [since, until): days oldest
        first, chats and agents by tokens, most first."""
        if by not in _KEYS:
            raise ValueError(f"unknown grouping {by!r} (one of {', '.join(GROUPINGS)})")
        where, args = _period(since, until)
        if by == BY_CHAT:
            rows = self._query(
                f"SELECT t.conversation_id, c.title, c.agent, {_SUMS} FROM turns t"
                f" JOIN conversations c ON c.id = t.conversation_id {where}"
                " GROUP BY t.conversation_id", *args, flush=True)
            out = [_row(r[0], r[1], r[3:], r[2]) for r in rows]
        else:
            rows = self._query(f"SELECT {_KEYS[by]} AS k, {_SUMS} FROM turns t {where}"
                               " GROUP BY k", *args, flush=True)
            out = [_row(r[0], str(r[0]), r[1:]) for r in rows]
        if by == BY_DAY:
            return sorted(out, key=lambda r: str(r.key))
        return sorted(out, key=lambda r: (-r.tokens, -(r.cost_usd or 0), r.label))

    def usage_total(self, since: float | None = None, until: float | None = None) -> UsageRow:
        where, args = _period(since, until)
        row = self._query(f"SELECT {_SUMS} FROM turns t {where}", *args, flush=True)[0]
        return _row(None, "total", row)

    def usage_by_day_agent(self, since: float | None = None,
                           until: float | None = None) -> list[DayAgent]:
        """Tokens, cost and time per day and agent (days oldest first): the chart's bars."""
        where, args = _period(since, until)
        rows = self._query(
            f"SELECT {_KEYS[BY_DAY]} AS d, t.agent,"
            " SUM(COALESCE(t.input_tokens, 0) + COALESCE(t.output_tokens, 0)),"
            " SUM(t.cost_usd), COUNT(t.cost_usd),"
            " SUM(COALESCE(t.duration_ms, CAST((t.finished_at - t.started_at) * 1000 AS INTEGER)))"
            f" FROM turns t {where} GROUP BY d, t.agent ORDER BY d, t.agent", *args, flush=True)
        return [DayAgent(str(d), str(agent), int(tokens or 0),
                         float(cost) if costed else None, int(ms or 0))
                for d, agent, tokens, cost, costed, ms in rows]

    def chat_context(self, conversation_id: int) -> ContextState | None:
        """The newest turn of the chat that reported its context (or rate limits)."""
        rows = self._query(
            "SELECT agent, id, context_tokens, context_window, rate_limits, started_at"
            " FROM turns WHERE conversation_id = ? AND (context_tokens IS NOT NULL"
            " OR context_window IS NOT NULL OR rate_limits IS NOT NULL)"
            " ORDER BY id DESC LIMIT 1", conversation_id, flush=True)
        return _context(rows[0]) if rows else None

    def rate_limits(self) -> dict[str, ContextState]:
        """Per agent, the newest turn that reported the plan's rate limits."""
        rows = self._query(
            "SELECT agent, id, context_tokens, context_window, rate_limits, started_at"
            " FROM turns WHERE id IN (SELECT MAX(id) FROM turns"
            " WHERE rate_limits IS NOT NULL GROUP BY agent)", flush=True)
        return {row[0]: _context(row) for row in rows}


def _context(row: tuple[Any, ...]) -> ContextState:
    agent, turn_id, tokens, window, limits, at = row
    try:
        windows = json.loads(limits) if limits else None
    except ValueError:
        windows = None
    return ContextState(agent, turn_id, tokens, window,
                        windows if isinstance(windows, list) else None, at)


def _period(since: float | None, until: float | None) -> tuple[str, list[float]]:
    conds, args = [], []
    if since is not None:
        conds.append("t.started_at >= ?")
        args.append(since)
    if until is not None:
        conds.append("t.started_at < ?")
        args.append(until)
    return ("WHERE " + " AND ".join(conds)) if conds else "", args
