"""The "Previous conversation:" preamble sent with a follow-up prompt, and the turns it is made of.

For adapters that cannot resume their own session, a follow-up carries the earlier turns in its
prompt. The prompt usually travels as one argv element, and the kernel counts argv in bytes: one
element may hold at most 128 KiB (MAX_ARG_STRLEN) and all of argv plus the environment at most
ARG_MAX. A budget counted in characters let a CJK or emoji chat (3-4 bytes a character) reach
"Argument list too long" after a few turns, so the budget is in UTF-8 bytes: newest turns first,
each answer clipped, the oldest left out once the next one would not fit.

An abandoned (restarted) attempt is no part of the history: its re-run took its place.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tolaria.core.events import TextDelta
from tolaria.core.store.db import MARKER_TURN_RESTARTED, Store, Turn

#: Characters kept of one earlier answer (its end: that is where agents conclude).
MAX_ANSWER_CHARS = 4000
#: Characters kept of one earlier prompt.
MAX_PROMPT_CHARS = 2000
#: Earlier turns looked at, newest first.
MAX_TURNS = 12
#: Linux's cap on one argv element, its terminating NUL included (MAX_ARG_STRLEN, 32 pages).
MAX_ARG_STRLEN = 131_072
#: Budget of the whole preamble in UTF-8 bytes (an ASCII chat keeps what 48 000 characters kept),
#: far under MAX_ARG_STRLEN with the prompt after it and the template's text around it.
MAX_PREAMBLE_BYTES = 48_000
#: Bytes of one argv element kept free for the template's text around ``{prompt}``.
ARG_MARGIN_BYTES = 4096
#: Bytes of ARG_MAX kept free for the rest of argv and the variables the runner adds.
EXEC_MARGIN_BYTES = 64 * 1024
#: What each argv or environment string costs besides its bytes: its NUL and its pointer.
_PER_STRING = 1 + 8

_HEADER = "Previous conversation:\n\n"
_FOOTER = "\n\n(end of previous conversation)\n\n"
_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Exchange:
    prompt: str
    answer: str
    status: str


def utf8_len(text: str) -> int:
    """Bytes ``text`` takes in argv (lone surrogates counted as the 3 bytes they would take)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _arg_max() -> int:
    if sys.platform == "win32":  # no sysconf (a command line holds 32 767 characters there)
        return MAX_ARG_STRLEN
    try:
        value = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError, AttributeError):  # not POSIX (Windows: 32 767 characters)
        return MAX_ARG_STRLEN
    return value if value > 0 else MAX_ARG_STRLEN


def environment_bytes(env: Mapping[str, str]) -> int:
    """What ``env`` takes of ARG_MAX (each ``NAME=value`` string, its NUL and its pointer)."""
    return sum(utf8_len(k) + 1 + utf8_len(v) + _PER_STRING for k, v in env.items())


def preamble_budget(prompt: str, env: Mapping[str, str] | None = None) -> int:
    """Bytes the preamble may take in front of ``prompt`` so the argv element holding both stays
    under MAX_ARG_STRLEN and argv plus ``env`` (default: this process's environment) under
    ARG_MAX, each with a margin."""
    own = utf8_len(prompt) + _PER_STRING
    per_arg = MAX_ARG_STRLEN - ARG_MARGIN_BYTES - own
    whole = (_arg_max() - EXEC_MARGIN_BYTES - own
             - environment_bytes(os.environ if env is None else env))
    return max(0, min(MAX_PREAMBLE_BYTES, per_arg, whole))


def _clip_end(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _clip_start(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _block(exchange: Exchange) -> str:
    answer = _clip_end(exchange.answer.strip(), MAX_ANSWER_CHARS)
    if exchange.status == "cancelled":
        answer += "\n[stopped by the user]"
    elif exchange.status in ("failed", "interrupted"):
        answer += f"\n[{exchange.status}]"
    return (f"User: {_clip_start(exchange.prompt.strip(), MAX_PROMPT_CHARS)}\n\n"
            f"Assistant: {answer.strip() or '(no answer)'}")


def build_prompt(history: Sequence[Exchange], prompt: str, *,
                 budget: int = MAX_PREAMBLE_BYTES) -> str:
    """``prompt`` alone for a first turn, else the preamble (at most ``budget`` UTF-8 bytes,
    the newest exchanges kept) followed by ``prompt``."""
    parts: list[str] = []
    used = utf8_len(_HEADER + _FOOTER)
    for exchange in reversed(history[-MAX_TURNS:]):
        block = _block(exchange)
        size = utf8_len(block) + (utf8_len(_SEPARATOR) if parts else 0)
        if used + size > budget:
            break
        parts.append(block)
        used += size
    if not parts:
        return prompt
    return f"{_HEADER}{_SEPARATOR.join(reversed(parts))}{_FOOTER}{prompt}"


def answered_turns(store: Store, conversation_id: int) -> list[Turn]:
    """The conversation's turns without the abandoned (restarted) attempts."""
    abandoned = {m.turn_id for m in store.markers(conversation_id, MARKER_TURN_RESTARTED)}
    return [t for t in store.turns(conversation_id) if t.id not in abandoned]


def exchanges(store: Store, turns: Iterable[Turn]) -> list[Exchange]:
    """The newest MAX_TURNS of ``turns`` as prompt, answer text and status."""
    out = []
    for turn in list(turns)[-MAX_TURNS:]:
        text = "".join(e.text for e in store.events(turn.id) if isinstance(e, TextDelta))
        out.append(Exchange(turn.prompt, text, turn.status))
    return out
