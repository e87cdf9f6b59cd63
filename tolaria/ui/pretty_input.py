"""A tool's input as the user reads it before allowing it: pretty, short, and without secrets.

Values under secret-looking keys (``api_key``, ``token``, ``password``...) and secret-looking
text (``sk-...`` keys, GitHub/Slack/AWS tokens, JWTs, ``Bearer ...``, ``FOO_TOKEN=...``) are
shown as ``•••``. This is a screen against showing a secret by accident, not a guarantee: the
agent still gets its input unchanged.
"""

from __future__ import annotations

import json
import re

MASK = "•••"
MAX_LINES = 24
MAX_CHARS = 4000

_SECRET_KEY = re.compile(r"(?i)(api[_-]?key|token|secret|passw(or)?d|credential|private[_-]?key"
                         r"|authorization|cookie)")
_SECRET_TEXT = [
    re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_-]{12,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{16,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
]
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_ASSIGNMENT = re.compile(r"(?i)\b([A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)[A-Z0-9_]*)"
                         r"(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|\S+)")


def redact_text(text: str) -> str:
    for pattern in _SECRET_TEXT:
        text = pattern.sub(MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


def redact_value(value: object) -> object:
    """A copy of a JSON-like value with secret-looking keys' values and texts masked."""
    if isinstance(value, dict):
        return {key: (MASK if isinstance(key, str) and _SECRET_KEY.search(key)
                      and value[key] not in (None, "") else redact_value(value[key]))
                for key in value}
    if isinstance(value, list | tuple):
        return [redact_value(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def pretty_input(value: object, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> str:
    """The input for the prompt card: a lone command as is, anything else as indented JSON;
    cut to ``max_lines`` lines and ``max_chars`` characters, saying how much was left out."""
    if value is None or value == {}:
        return "(no input)"
    shown = redact_value(value)
    if isinstance(shown, dict) and set(shown) <= {"command", "description"} \
            and isinstance(shown.get("command"), str):
        text = str(shown["command"])
    elif isinstance(shown, str):
        text = shown
    else:
        text = json.dumps(shown, indent=2, ensure_ascii=False, default=str)
    lines = text.splitlines() or [""]
    cut = ""
    if len(lines) > max_lines:
        cut = f"… {len(lines) - max_lines} more lines"
        lines = lines[:max_lines]
    text = "\n".join(lines)
    if len(text) > max_chars:
        cut = f"… {len(text) - max_chars} more characters"
        text = text[:max_chars]
    return f"{text}\n{cut}" if cut else text
