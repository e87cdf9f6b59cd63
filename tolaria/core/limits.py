"""Limits that stop a run by themselves: wall time, cost, tokens, tool calls (issue 27).

``RunLimits`` says what one run may spend (``None``: no limit of that kind); the turn engine's
watcher (tolaria/chats/engine/limits.py) stops the run the normal way when one is reached and
names it in the run's ``Done`` (``limit``, ``limit_value``). The texts here are the one wording
of the window, ``tolaria run`` and ``--json`` readers: "stopped: $2.00 limit reached",
"80 % of the $2.00 limit used".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TIME = "time"
COST = "cost"
TOKENS = "tokens"
TOOL_CALLS = "tool_calls"
KINDS = (TIME, COST, TOKENS, TOOL_CALLS)
#: ``Diagnostic.source`` of the warning at ``WARN_FRACTION`` of a limit.
WARNING_SOURCE = "limit"
WARN_FRACTION = 0.8
#: ``Done.limit`` of a run stopped by its fan-out job's budget: "job_" + the kind.
JOB_PREFIX = "job_"


@dataclass(frozen=True)
class RunLimits:
    """What one run may spend; ``None`` (or 0 in settings) means no limit of that kind."""

    max_time_s: float | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    max_tool_calls: int | None = None

    def value(self, kind: str) -> float | None:
        return {TIME: self.max_time_s, COST: self.max_cost_usd,
                TOKENS: self.max_tokens, TOOL_CALLS: self.max_tool_calls}[kind]

    def active(self) -> bool:
        return any(self.value(kind) is not None for kind in KINDS)

    def over(self, other: RunLimits) -> RunLimits:
        """These limits where set, ``other``'s elsewhere (a chat's overrides over the
        defaults, ``tolaria run``'s flags over the settings)."""
        return RunLimits(*(self.value(k) if self.value(k) is not None else other.value(k)
                           for k in KINDS))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, float | int | None]:
        return {"max_time_s": self.max_time_s, "max_cost_usd": self.max_cost_usd,
                "max_tokens": self.max_tokens, "max_tool_calls": self.max_tool_calls}

    def effective(self) -> RunLimits:
        """A 0 (set to lift a default: "no limit") as no limit."""
        return RunLimits.from_dict(self.to_dict())

    @classmethod
    def from_dict(cls, data: object, *, keep_zeros: bool = False) -> RunLimits:
        """From ``to_dict``'s form; anything not a positive number counts as no limit (with
        ``keep_zeros``, a 0 stays: a chat's "no limit" over the defaults)."""
        if not isinstance(data, dict):
            return cls()

        def number(key: str) -> float | None:
            value = data.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not value >= 0 or value == math.inf or (value == 0 and not keep_zeros):
                return None
            return float(value)

        tokens, calls = number("max_tokens"), number("max_tool_calls")
        return cls(number("max_time_s"), number("max_cost_usd"),
                   int(tokens) if tokens is not None else None,
                   int(calls) if calls is not None else None)


def positive_or_none(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


def _number(value: float) -> str:
    return f"{value:g}" if value != int(value) else f"{int(value):,}"


def label(kind: str, value: float) -> str:
    """The limit as a person says it: "$2.00", "10 min", "90 s", "50,000 tokens",
    "20 tool calls"."""
    if kind == COST:
        return f"${value:,.2f}"
    if kind == TIME:
        if value >= 60 and value % 60 == 0:
            return f"{int(value // 60)} min"
        if value >= 60:
            return f"{value / 60:.1f} min"
        return f"{_number(value)} s"
    if kind == TOKENS:
        return f"{_number(value)} tokens"
    if kind == TOOL_CALLS:
        return f"{_number(value)} tool call" + ("" if value == 1 else "s")
    return f"{kind} {_number(value)}"


def stopped_text(kind: str, value: float | None) -> str:
    """What a turn stopped by a limit says: "stopped: $2.00 limit reached" (a fan-out job's
    budget: "stopped: the job's $5.00 budget reached")."""
    if kind.startswith(JOB_PREFIX) and value is not None:
        return f"stopped: the job's {label(kind[len(JOB_PREFIX):], value)} budget reached"
    if value is None:
        return f"stopped: {kind} limit reached"
    return f"stopped: {label(kind, value)} limit reached"


def warning_text(kind: str, value: float) -> str:
    if kind.startswith(JOB_PREFIX):
        return (f"{int(WARN_FRACTION * 100)} % of the job's "
                f"{label(kind[len(JOB_PREFIX):], value)} budget used")
    return f"{int(WARN_FRACTION * 100)} % of the {label(kind, value)} limit used"
