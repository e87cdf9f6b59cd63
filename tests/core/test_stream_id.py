from __future__ import annotations

import re
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tolaria.core.stream_id import (
    PREFIX,
    InvalidStreamId,
    is_valid_stream_id,
    new_stream_id,
    validate_stream_id,
)

SAFE = string.ascii_letters + string.digits + "-"


def test_new_stream_id_shape() -> None:
    ids = {new_stream_id() for _ in range(200)}
    assert len(ids) == 200
    for sid in ids:
        assert re.fullmatch(r"ai-agent-stream-[0-9a-f]{32}", sid)
        assert validate_stream_id(sid) == sid


@given(st.text(alphabet=SAFE, min_size=1, max_size=64))
def test_every_safe_suffix_is_accepted(suffix: str) -> None:
    assert validate_stream_id(PREFIX + suffix) == PREFIX + suffix


@given(st.text(min_size=1, max_size=80))
def test_only_safe_ids_are_accepted(suffix: str) -> None:
    candidate = PREFIX + suffix
    ok = all(c in SAFE for c in suffix) and len(suffix) <= 64
    assert is_valid_stream_id(candidate) is ok
    if not ok:
        with pytest.raises(InvalidStreamId):
            validate_stream_id(candidate)


@given(st.text(max_size=100))
def test_wrong_prefix_is_rejected(value: str) -> None:
    if value.startswith(PREFIX):
        return
    with pytest.raises(InvalidStreamId):
        validate_stream_id(value)


@pytest.mark.parametrize(
    "value",
    [
        "", PREFIX, "AI-AGENT-STREAM-abc", " ai-agent-stream-abc", PREFIX + "abc\n", PREFIX + "a b",
        PREFIX + "a/../b", PREFIX + "é", PREFIX + "a" * 65, PREFIX + "a;rm -rf ~", "1234",
        PREFIX + "\x00", PREFIX + "ａ",  # fullwidth letter: not ASCII
    ],
)
def test_rejects_with_a_clear_message(value: str) -> None:
    with pytest.raises(InvalidStreamId) as info:
        validate_stream_id(value)
    assert str(info.value)


@pytest.mark.parametrize("value", [None, 12, b"ai-agent-stream-abc", ["x"]])
def test_rejects_non_strings(value: object) -> None:
    with pytest.raises(InvalidStreamId, match="must be a string"):
        validate_stream_id(value)


def test_length_limits() -> None:
    assert validate_stream_id(PREFIX + "a" * 64)
    assert len(PREFIX + "a" * 64) == 80
    with pytest.raises(InvalidStreamId, match="limit is 80"):
        validate_stream_id(PREFIX + "a" * 65)
