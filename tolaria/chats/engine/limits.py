"""The limit watcher: one run's spending, counted from its events, stopping it at a limit.

It sits in front of the stream gate (its ``deliver`` is the runner's ``on_event``), so it sees
every event of the run as the agent says it: ``Usage`` (tokens and cost, as the agent reports
them: each report is the run's total so far), ``ToolStart`` (one tool call each, counted by
tool id) and the wall time since the run started (a timer). At 80 % of a limit it says so once,
a ``Diagnostic`` of source ``limit`` that is stored and shown like any event; when a limit is
reached it asks ``stop`` (the engine's: the same path as the user's Stop, polite then the
tree), and the run's ``Done``, if it ends cancelled, names the limit (``Done.limit``). A run
that ended by itself before the stop took keeps its own ``Done``.

A tool call beyond the limit is held back (the run is stopped as it starts it): ``max_tool_calls
N`` lets N tool calls run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from collections.abc import Callable

from tolaria.core.events import STOP_CANCELLED, Diagnostic, Done, Event, ToolStart, Usage
from tolaria.core.limits import (
    COST,
    JOB_PREFIX,
    TIME,
    TOKENS,
    TOOL_CALLS,
    WARN_FRACTION,
    WARNING_SOURCE,
    RunLimits,
    warning_text,
)
from tolaria.core.store.db import Store


class LimitWatcher:
    """One run's limits (see the module docstring). On the loop thread."""

    def __init__(self, stream_id: str, limits: RunLimits, forward: Callable[[Event], None],
                 stop: Callable[[str], None], *, budget: JobBudget | None = None) -> None:
        self.stream_id = stream_id
        self.limits = limits
        self._forward = forward
        self._stop = stop
        #: The fan-out job's budget this run spends from (with the job's other runs).
        self.budget = budget
        if budget is not None:
            budget.members.append(self)
        #: The limit that stopped the run, once one did, and its value.
        self.reached: str | None = None
        self.reached_value: float | None = None
        self.spent: dict[str, float] = {TIME: 0.0, COST: 0.0, TOKENS: 0.0, TOOL_CALLS: 0.0}
        self._tools: set[str] = set()
        self._warned: set[str] = set()
        self._timers: list[asyncio.TimerHandle] = []
        self._started = 0.0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the wall-time clock (now)."""
        self._started = loop.time()
        limit = self.limits.max_time_s
        if limit is None:
            return
        self._timers.append(loop.call_later(limit * WARN_FRACTION, self._time_warning))
        self._timers.append(loop.call_later(limit, self._time_up))

    def elapsed(self) -> float:
        if not self._started:
            return 0.0
        return asyncio.get_running_loop().time() - self._started

    def cancel(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    def deliver(self, event: Event) -> None:
        """The runner's ``on_event``: count, forward, then warn or stop."""
        if isinstance(event, Done):
            self.cancel()
            self.spent[TIME] = self.elapsed()
            if self.reached is not None and event.stop_reason == STOP_CANCELLED:
                event = dataclasses.replace(event, limit=self.reached,
                                            limit_value=self.reached_value)
            self._forward(event)
            if self.budget is not None:
                self.budget.finished(self)
            return
        if isinstance(event, ToolStart) and event.tool_id not in self._tools:
            self._tools.add(event.tool_id)
            self.spent[TOOL_CALLS] = len(self._tools)
            limit = self.limits.max_tool_calls
            if limit is not None and self._total(TOOL_CALLS) > limit:
                self._reach(TOOL_CALLS)  # the call beyond the limit never shows: stopped
                return
            if self.budget is not None:
                self.budget.check(self, TOOL_CALLS)
                if self.reached is not None:
                    return  # beyond the job's budget: not shown either
            self._forward(event)
            self._check_own(TOOL_CALLS, strict=True)
            return
        self._forward(event)
        if isinstance(event, Usage):
            tokens = (event.input_tokens or 0) + (event.output_tokens or 0)
            if tokens:
                self.spent[TOKENS] = max(self.spent[TOKENS], float(tokens))
                self._check(TOKENS)
            if event.cost_usd is not None:
                self.spent[COST] = max(self.spent[COST], float(event.cost_usd))
                self._check(COST)

    # -- inside --------------------------------------------------------------------------------
    def _total(self, kind: str) -> float:
        return self.spent[kind]

    def _check(self, kind: str, *, strict: bool = False) -> None:
        """Warn at 80 %, stop at the limit (``strict``: only beyond it, for counted calls);
        then the job's budget, if the run has one."""
        self._check_own(kind, strict=strict)
        if self.budget is not None and self.reached is None:
            self.budget.check(self, kind)

    def _check_own(self, kind: str, *, strict: bool = False) -> None:
        limit = self.limits.value(kind)
        if limit is None or self.reached is not None:
            return
        used = self._total(kind)
        if used > limit or (not strict and used >= limit):
            self._reach(kind)
        elif used >= _warn_level(limit, kind):
            self._warn(kind)

    def _warn(self, kind: str) -> None:
        limit = self.limits.value(kind)
        if kind in self._warned or limit is None or self.reached is not None:
            return
        self._warned.add(kind)
        self.say(warning_text(kind, limit))

    def say(self, message: str) -> None:
        """A limit's note in this run's chat (stored and shown)."""
        self._forward(Diagnostic(self.stream_id, source=WARNING_SOURCE, message=message))

    def _reach(self, kind: str, value: float | None = None) -> None:
        if self.reached is not None:
            return
        self.reached = kind
        self.reached_value = value if value is not None else self.limits.value(kind)
        self.cancel()
        self._stop(kind)

    def reach_budget(self, kind: str, value: float) -> None:
        """The job's budget is spent: stop this run too, naming the budget."""
        self._reach(JOB_PREFIX + kind, value)

    def _time_warning(self) -> None:
        self._warn(TIME)

    def _time_up(self) -> None:
        self.spent[TIME] = self.elapsed()
        self._reach(TIME)


def _warn_level(limit: float, kind: str) -> float:
    level = limit * WARN_FRACTION
    return math.ceil(level) if kind in (TOKENS, TOOL_CALLS) else level


def chat_limits(store: Store | None, conversation_id: int) -> RunLimits:
    """The chat's own limits as stored (nothing set: no limit of its own)."""
    conversation = store.get_conversation(conversation_id) if store is not None else None
    if conversation is None or not conversation.limits:
        return RunLimits()
    try:
        return RunLimits.from_dict(json.loads(conversation.limits), keep_zeros=True)
    except ValueError:
        return RunLimits()


def set_chat_limits(store: Store, conversation_id: int, limits: RunLimits) -> None:
    """Store the chat's own limits (unset: the default; 0: no limit; all unset: the
    defaults again)."""
    data = limits.to_dict()
    store.set_conversation_limits(
        conversation_id, json.dumps(data) if any(v is not None for v in data.values()) else None)


class JobBudget:
    """A fan-out job's budget (cost, tokens, tool calls; time stays per run): the sum of what
    its members' runs spent. When it is reached every member still running is stopped, each
    ``Done`` naming it (``job_cost``...); the 80 % warning comes once, in the run that crossed
    it."""

    def __init__(self, limits: RunLimits) -> None:
        self.limits = dataclasses.replace(limits, max_time_s=None)
        self.members: list[LimitWatcher] = []
        #: Spent by members that ended, by kind.
        self._ended: dict[str, float] = {TIME: 0.0, COST: 0.0, TOKENS: 0.0, TOOL_CALLS: 0.0}
        self.reached: str | None = None
        self._warned: set[str] = set()

    def total(self, kind: str) -> float:
        return self._ended[kind] + sum(m.spent[kind] for m in self.members)

    def check(self, member: LimitWatcher, kind: str) -> None:
        limit = self.limits.value(kind)
        if limit is None or self.reached is not None:
            return
        used = self.total(kind)
        if used > limit or (kind != TOOL_CALLS and used >= limit):
            self.reached = kind
            for other in list(self.members):
                other.reach_budget(kind, limit)
        elif used >= _warn_level(limit, kind) and kind not in self._warned:
            self._warned.add(kind)
            member.say(warning_text(JOB_PREFIX + kind, limit))

    def finished(self, member: LimitWatcher) -> None:
        if member in self.members:
            self.members.remove(member)
            for kind in self._ended:
                self._ended[kind] += member.spent[kind]
