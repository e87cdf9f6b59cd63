"""A tool's input as the user reads it before allowing it: pretty, short, and without secrets.

Values under secret-looking keys (``api_key``, ``token``, ``password``...) and secret-looking
text (``sk-...`` keys, GitHub/Slack/AWS tokens, JWTs, ``Bearer ...``, ``FOO_TOKEN=...``) are
shown as ``***``: the one secret policy of tolaria/support/redact.py, the same that keeps them
out of crash reports and logs. This is a screen against showing a secret by accident, not a
guarantee: the agent still gets its input unchanged.
"""

from __future__ import annotations

import json

from tolaria.support.redact import MASK, redact_data, redact_text

# The card's title is redacted with the same policy (tolaria/ui/transcript/permission_card.py).
__all__ = ["MASK", "MAX_CHARS", "MAX_LINES", "pretty_input", "redact_text"]

MAX_LINES = 24
MAX_CHARS = 4000


def pretty_input(value: object, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> str:
    """The input for the prompt card: a lone command as is, anything else as indented JSON;
    cut to ``max_lines`` lines and ``max_chars`` characters, saying how much was left out."""
    if value is None or value == {}:
        return "(no input)"
    shown = redact_data(value)
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
