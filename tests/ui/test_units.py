"""Pure helpers of the UI layer: markdown chunking, the follow-up preamble, formatting."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tolaria.chats.history import MAX_PREAMBLE_BYTES, Exchange, build_prompt
from tolaria.ui.sidebar.sidebar import relative_time
from tolaria.ui.transcript.markdown import split_markdown
from tolaria.ui.transcript.turn_view import format_duration, format_usage, status_from_stop_reason


def test_split_prefers_a_blank_line_outside_code() -> None:
    text = "para one\n\n" + "x" * 60 + "\n\n```py\n" + "a = 1\n\nb = 2\n" * 10 + "```\n"
    split = split_markdown(text, 100)
    assert split is not None
    assert split.sealed == "para one\n\n" + "x" * 60
    assert split.rest.startswith("```py\n")


def test_split_inside_a_fence_closes_and_reopens_it() -> None:
    text = "```python\n" + "".join(f"line_{i} = {i}\n" for i in range(100))
    split = split_markdown(text, 200)
    assert split is not None
    assert split.sealed.startswith("```python\n") and split.sealed.endswith("\n```")
    assert split.rest.startswith("```python\n")
    def body(s: str) -> list[str]:
        return [ln for ln in s.splitlines() if not ln.startswith("```")]
    assert body(split.sealed) + body(split.rest) == body(text)


def test_split_without_any_break_cuts_at_the_limit() -> None:
    assert split_markdown("short", 100) is None
    split = split_markdown("y" * 250, 100)
    assert split is not None and split.sealed == "y" * 100 and split.rest == "y" * 150


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab \n#-*>", max_size=600), st.integers(min_value=20, max_value=200))
def test_split_loses_no_text(text: str, limit: int) -> None:
    split = split_markdown(text, limit)
    if split is None:
        assert len(text) <= limit
        return
    assert 0 < len(split.sealed) <= limit
    def squeeze(s: str) -> str:
        return "".join(s.split())
    assert squeeze(split.sealed) + squeeze(split.rest) == squeeze(text)


def test_preamble_is_bounded_and_newest_first() -> None:
    assert build_prompt([], "hi") == "hi"
    history = [Exchange(f"question {i}", "answer " * 2000, "completed") for i in range(30)]
    prompt = build_prompt(history, "next")
    assert prompt.startswith("Previous conversation:")
    assert prompt.endswith("next")
    assert len(prompt.encode()) <= MAX_PREAMBLE_BYTES + len("next")
    assert "question 29" in prompt and "question 0\n" not in prompt
    stopped = build_prompt([Exchange("q", "partial", "cancelled")], "again")
    assert "[stopped by the user]" in stopped


def test_formatting() -> None:
    assert format_duration(8_400) == "8.4 s"
    assert format_duration(125_000) == "2 min 05 s"
    assert format_usage(1200, 30, 0.0123) == "1,200 in / 30 out tokens · $0.0123"
    assert format_usage(None, None, None) == ""
    assert status_from_stop_reason("end_turn") == "completed"
    assert status_from_stop_reason("cancelled") == "cancelled"
    assert status_from_stop_reason("max_iterations") == "failed"
    assert relative_time(1000.0, 1030.0) == "just now"
    assert relative_time(1000.0, 1000.0 + 3 * 3600) == "3 h ago"
