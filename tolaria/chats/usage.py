"""Usage in words, for ``tolaria usage`` and the window's Usage page alike: the period a user
names (``--since``), and tokens, cost and agent time as both print them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from tolaria.core.store.db import Store
from tolaria.core.store.usage import ContextState, DayAgent, UsageRow


class BadPeriod(ValueError):
    """A ``--since`` that is neither a date nor a number of days."""


_DAYS = re.compile(r"(\d{1,5})\s*d(ays?)?")


def since_of(text: str, today: date | None = None) -> float:
    """The start (local midnight, epoch seconds) of ``YYYY-MM-DD``, ``today``, or ``Nd`` (the
    last N days, today included)."""
    today = today or date.today()
    spelled = text.strip().lower()
    if spelled == "today":
        day = today
    elif match := _DAYS.fullmatch(spelled):
        count = int(match.group(1))
        if count < 1:
            raise BadPeriod("--since: give at least 1 day (1d is today)")
        day = today - timedelta(days=count - 1)
    else:
        try:
            day = date.fromisoformat(spelled)
        except ValueError:
            raise BadPeriod(f"--since: {text!r} is not a date (YYYY-MM-DD), 'today' or a "
                            "number of days (7d)") from None
    return datetime(day.year, day.month, day.day).timestamp()


def tokens(count: int) -> str:
    """12 · 9.4k · 200k · 1.25M: short enough for a table cell, exact below ten thousand."""
    if count < 10_000:
        return f"{count:,}"
    if count < 1_000_000:
        return _short(f"{count / 1000:.1f}") + "k"
    return _short(f"{count / 1_000_000:.2f}") + "M"


def _short(number: str) -> str:
    """200.0 -> 200, 1.50 -> 1.5."""
    return number.rstrip("0").rstrip(".") if "." in number else number


def cost(usd: float | None) -> str:
    """$0.0123 · $4.20 · "—" when the agent reports no cost (not $0)."""
    if usd is None:
        return "—"
    return f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"


def agent_time(ms: int) -> str:
    """0.8 s · 42 s · 3 min 5 s · 2 h 14 min."""
    seconds = ms / 1000
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


@dataclass(frozen=True)
class UsageReport:
    """What a Usage view shows: the rows of one grouping, the total, the chart's segments and
    the plans' rate limits (newest per agent)."""

    by: str
    since: float | None
    rows: list[UsageRow]
    total: UsageRow
    bars: list[DayAgent]
    rate_limits: dict[str, ContextState]


def report(store: Store, by: str, since: float | None = None) -> UsageReport:
    return UsageReport(by, since, store.usage(by, since), store.usage_total(since),
                       store.usage_by_day_agent(since), store.rate_limits())
