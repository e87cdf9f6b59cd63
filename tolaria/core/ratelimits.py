"""A plan's rate limits as the CLIs report them, in one form (``Usage.rate_limits``).

Claude prints ``rate_limit_event`` lines (``rate_limit_info``: ``status``, ``rateLimitType``,
``utilization``, ``resetsAt``), one window at a time; Codex writes ``token_count`` events with
``rate_limits`` (``primary``/``secondary``: ``used_percent``, ``window_minutes``, ``resets_at``)
in its session file. Both become a list of windows::

    {"name": "five_hour", "used_percent": 82.0, "resets_at": 1800000000.0, "status": "allowed"}

(``used_percent``, ``resets_at`` (epoch seconds) and ``status`` may be None). A window the CLI
says nothing about is left out: nothing is invented.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

Window = dict[str, Any]

#: Readable names of the windows the CLIs name.
_NAMES = {"five_hour": "5-hour", "seven_day": "weekly", "seven_day_opus": "weekly (Opus)",
          "seven_day_sonnet": "weekly (Sonnet)", "overage": "overage"}


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _epoch(value: object) -> float | None:
    """Epoch seconds from seconds or milliseconds (the CLIs print either)."""
    number = _number(value)
    if number is None or number <= 0:
        return None
    return number / 1000 if number > 1e11 else number


def from_claude(info: object) -> list[Window]:
    """Claude's ``rate_limit_info``: one window, or none when it carries no name or figure."""
    if not isinstance(info, Mapping):
        return []
    name = info.get("rateLimitType")
    used = _number(info.get("utilization"))
    if used is not None and used <= 1.0:
        used *= 100  # a fraction (0.85), as most versions print it
    status = info.get("status")
    if not isinstance(name, str) or (used is None and info.get("resetsAt") is None):
        return []
    return [{"name": name, "used_percent": used, "resets_at": _epoch(info.get("resetsAt")),
             "status": status if isinstance(status, str) else None}]


def from_codex(limits: object, now: float | None = None) -> list[Window]:
    """Codex's ``rate_limits``: its primary and secondary windows that say anything."""
    if not isinstance(limits, Mapping):
        return []
    now = time.time() if now is None else now
    out: list[Window] = []
    for key in ("primary", "secondary"):
        window = limits.get(key)
        if not isinstance(window, Mapping):
            continue
        used = _number(window.get("used_percent"))
        resets = _epoch(window.get("resets_at"))
        if resets is None and (seconds := _number(window.get("resets_in_seconds"))) is not None:
            resets = now + seconds
        if used is None and resets is None:
            continue
        minutes = _number(window.get("window_minutes"))
        out.append({"name": _codex_name(minutes, key), "used_percent": used,
                    "resets_at": resets, "status": None})
    return out


def _codex_name(minutes: float | None, key: str) -> str:
    if minutes == 300:
        return "five_hour"
    if minutes == 7 * 24 * 60:
        return "seven_day"
    if minutes:
        return f"{int(minutes)}_minutes"
    return key


def merge(old: object, new: list[Window]) -> list[Window]:
    """``old`` windows updated by ``new`` ones (by name): Claude reports one window a line."""
    kept = [w for w in old if isinstance(w, dict)] if isinstance(old, list) else []
    names = {w["name"] for w in new}
    return [w for w in kept if w.get("name") not in names] + new


def label(name: str) -> str:
    return _NAMES.get(name, name.replace("_", " "))


def describe(window: Mapping[str, Any], now: float | None = None) -> str:
    """One window in words: "5-hour limit: 82 % used, resets in 2 h 10 min"."""
    parts = []
    used = window.get("used_percent")
    if isinstance(used, int | float):
        parts.append(f"{used:.0f} % used")
    status = window.get("status")
    if status == "rejected":
        parts.append("reached")
    resets = window.get("resets_at")
    if isinstance(resets, int | float):
        left = resets - (time.time() if now is None else now)
        parts.append("resets " + (f"in {_span(left)}" if left > 0 else "now"))
    return f"{label(str(window.get('name', '')))} limit: " + (", ".join(parts) or "reported")


def _span(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{max(minutes, 1)} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} days"
