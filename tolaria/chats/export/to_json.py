"""The JSON export: one document for scripts (its shape, versioned: docs/EXPORT.md).

Written as it is read: the head, then each turn as soon as it is built, then the totals, so a
long chat never becomes one object in memory. ``json.loads`` of the whole output gives
``{"format", "version", "exported_at", "tolaria", "chat", "turn_count", "turns", "totals"}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TextIO


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class Totals:
    """What the turns add up to (tokens and cost of the turns that reported them)."""

    def __init__(self) -> None:
        self.turns = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0
        self.statuses: dict[str, int] = {}

    def add(self, turn: dict[str, Any]) -> None:
        self.turns += 1
        usage = turn["usage"]
        self.input_tokens += usage["input_tokens"] or 0
        self.output_tokens += usage["output_tokens"] or 0
        self.cost_usd += usage["cost_usd"] or 0.0
        self.statuses[turn["status"]] = self.statuses.get(turn["status"], 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return {"turns": self.turns, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": round(self.cost_usd, 6),
                "statuses": self.statuses}


def write_json(head: dict[str, Any], turns: Iterable[dict[str, Any]], out: TextIO) -> None:
    totals = Totals()
    out.write("{\n")
    for key, value in head.items():
        out.write(f"  {_dump(key)}: {_dump(value)},\n")
    out.write('  "turns": [')
    for n, turn in enumerate(turns):
        totals.add(turn)
        out.write(",\n    " if n else "\n    ")
        out.write(_dump(turn))
    out.write("\n  ],\n" if totals.turns else "],\n")
    out.write(f'  "totals": {_dump(totals.as_dict())}\n}}\n')
