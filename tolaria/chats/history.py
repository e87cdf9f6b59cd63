"""The "Previous conversation:" preamble sent with a follow-up prompt.

For adapters that cannot resume their own session, a follow-up carries the earlier turns in its prompt.
The prompt travels as one argv element, and Linux caps one argument at 128 KiB
(MAX_ARG_STRLEN), so the preamble is bounded: newest turns first, each answer clipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Characters kept of one earlier answer (its end: that is where agents conclude).
MAX_ANSWER_CHARS = 4000
#: Characters kept of one earlier prompt.
MAX_PROMPT_CHARS = 2000
#: Budget of the whole preamble, well under one argv element's 128 KiB.
MAX_PREAMBLE_CHARS = 48_000
#: Earlier turns looked at, newest first.
MAX_TURNS = 12


@dataclass(frozen=True)
class Exchange:
    prompt: str
    answer: str
    status: str


def _clip_end(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _clip_start(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def build_prompt(history: Sequence[Exchange], prompt: str) -> str:
    """``prompt`` alone for a first turn, else the bounded preamble followed by ``prompt``."""
    parts: list[str] = []
    used = 0
    for exchange in reversed(history[-MAX_TURNS:]):
        answer = _clip_end(exchange.answer.strip(), MAX_ANSWER_CHARS)
        if exchange.status == "cancelled":
            answer += "\n[stopped by the user]"
        elif exchange.status in ("failed", "interrupted"):
            answer += f"\n[{exchange.status}]"
        block = (f"User: {_clip_start(exchange.prompt.strip(), MAX_PROMPT_CHARS)}\n\n"
                 f"Assistant: {answer.strip() or '(no answer)'}")
        if used + len(block) > MAX_PREAMBLE_CHARS:
            break
        parts.append(block)
        used += len(block)
    if not parts:
        return prompt
    body = "\n\n".join(reversed(parts))
    return (f"Previous conversation:\n\n{body}\n\n(end of previous conversation)\n\n"
            f"{prompt}")
