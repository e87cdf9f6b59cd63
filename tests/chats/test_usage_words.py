"""Usage in words, as ``tolaria usage`` and the Usage page print it, and the periods a user names."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from tolaria.chats.usage import BadPeriod, agent_time, cost, since_of, tokens

TODAY = date(2026, 12, 4)


def test_periods() -> None:
    midnight = datetime(2026, 12, 4).timestamp()
    assert since_of("today", TODAY) == since_of("1d", TODAY) == midnight
    assert since_of("7d", TODAY) == datetime(2026, 11, 28).timestamp()
    assert since_of(" 30 days ", TODAY) == datetime(2026, 11, 5).timestamp()
    assert since_of("2026-01-31", TODAY) == datetime(2026, 1, 31).timestamp()
    for bad in ("0d", "yesterday", "2026-02-30", "-3d", ""):
        with pytest.raises(BadPeriod, match="--since"):
            since_of(bad, TODAY)


def test_figures() -> None:
    assert [tokens(n) for n in (0, 9_999, 10_000, 34_250, 200_000, 1_000_000, 1_250_000)] == [
        "0", "9,999", "10k", "34.2k", "200k", "1M", "1.25M"]
    assert [cost(c) for c in (None, 0.0, 0.01234, 4.2, 1234.5)] == [
        "—", "$0.0000", "$0.0123", "$4.20", "$1,234.50"]
    assert [agent_time(ms) for ms in (800, 42_000, 185_000, 180_000, 8_040_000, 7_200_000)] == [
        "0.8 s", "42 s", "3 min 5 s", "3 min", "2 h 14 min", "2 h"]

