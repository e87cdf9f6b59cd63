"""The fast paths of the secret policy and of the export give what the slow ones give: the
assignment pre-check never skips a text the full pattern would change, and a flat tool input is
indented as ``json.dumps(indent=2)`` does."""

from __future__ import annotations

import json
import random

from tolaria.chats.export.words import input_json
from tolaria.core.events import TextDelta, text_delta
from tolaria.support import redact
from tolaria.support.redact import MASK, redact_text

_PIECES = ["token", "TOKEN", "api_key", "Api-Key", "key", "pass", "password", "=", ":", " ",
           "\t", "\n", "-", "--", "--token", '"', "'", '\\"', "\\", "abc", "x1y2z3w4",
           "secret", "Authorization", "a.b", "self.key", "==", ":=", "::", "=>", "é", "İ",
           "Token", "${HOME}", "<key>", "path", "author", "9"]


def test_the_pre_check_passes_every_text_the_pattern_changes() -> None:
    rng = random.Random(27)
    for _ in range(20_000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 20)))
        full = redact._ASSIGNMENT.sub(redact._mask_assignment, text)
        if full != text:
            assert redact._may_assign_secret(text), text


def test_secrets_after_names_are_still_masked() -> None:
    assert redact_text("export API_KEY=abc123def456") == f"export API_KEY={MASK}"
    assert redact_text('{"token": "x1y2z3w4v5"}') == f'{{"token": "{MASK}"}}'
    assert redact_text("run --token=x1y2z3w4v5 now") == f"run --token={MASK} now"
    assert redact_text("TOKENİX=x1y2z3w4v5") == f"TOKENİX={MASK}"  # not ASCII: the pattern
    assert redact_text("the path: src/a.py, the author: me") == \
        "the path: src/a.py, the author: me"


def test_flat_inputs_indent_as_json_does() -> None:
    for value in ({"command": "ls -la"}, {"a": 'é"\n\u2028\x00', "b": ""},
                  {"a": 1}, {"a": {"b": "c"}}, {"a": None, "b": True}):
        assert input_json(value) == json.dumps(value, indent=2, ensure_ascii=False, default=str)
    assert input_json({}) == input_json(None) == "(no input)"


def test_a_fast_text_delta_is_a_text_delta() -> None:
    fast, slow = text_delta("s", "hi"), TextDelta("s", text="hi")
    assert type(fast) is TextDelta and fast == slow and hash(fast) == hash(slow)
    assert repr(fast) == repr(slow)
