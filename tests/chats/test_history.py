"""The history preamble's budget is counted in UTF-8 bytes (issue 14, case 4): a CJK or emoji chat
stays under the kernel's 128 KiB per-argument limit and ARG_MAX; the oldest exchanges go first."""

from __future__ import annotations

import os

from tolaria.chats.history import (
    MAX_ARG_STRLEN,
    MAX_PREAMBLE_BYTES,
    Exchange,
    build_prompt,
    environment_bytes,
    preamble_budget,
    utf8_len,
)


def _wide_history(turns: int) -> list[Exchange]:
    """Long answers of 3- and 4-byte characters: 7 bytes for every 2 characters."""
    return [Exchange(f"質問 {i} " + "漢字" * 900, f"答え {i} " + "🙂漢" * 2500, "completed")
            for i in range(turns)]


def test_a_cjk_emoji_history_fits_one_argv_element_newest_first() -> None:
    history = _wide_history(12)
    prompt = build_prompt(history, "次は？")
    size = utf8_len(prompt)
    assert size <= MAX_PREAMBLE_BYTES + utf8_len("次は？") < MAX_ARG_STRLEN
    # Characters would have let ~7 such exchanges through (> 128 KiB); bytes keep the newest.
    assert "質問 11 " in prompt and "質問 10 " in prompt
    assert "質問 0 " not in prompt and "質問 5 " not in prompt
    assert prompt.endswith("(end of previous conversation)\n\n次は？")
    kept = [i for i in range(12) if f"質問 {i} " in prompt]
    assert kept == list(range(kept[0], 12))  # a contiguous run of the newest, oldest left out


def test_ascii_history_keeps_what_the_character_budget_kept() -> None:
    history = [Exchange(f"question {i}", "answer " * 2000, "completed") for i in range(30)]
    prompt = build_prompt(history, "next")
    assert utf8_len(prompt) <= MAX_PREAMBLE_BYTES + len("next")
    # The 11 newest, as the former budget of 48 000 characters kept (each answer is clipped to
    # its last 4000 characters).
    assert [i for i in range(30) if f"question {i}\n" in prompt] == list(range(19, 30))


def test_a_long_prompt_or_a_big_environment_shrinks_the_budget() -> None:
    small_env = {"PATH": "/usr/bin"}
    assert preamble_budget("hi", small_env) == MAX_PREAMBLE_BYTES
    long_prompt = "語" * 30_000  # 90 000 bytes: the preamble gets what is left of 128 KiB
    left = preamble_budget(long_prompt, small_env)
    assert 0 < left < MAX_PREAMBLE_BYTES
    assert left + utf8_len(long_prompt) < MAX_ARG_STRLEN
    full = build_prompt(_wide_history(12), long_prompt, budget=left)
    assert utf8_len(full) < MAX_ARG_STRLEN
    # An environment that fills ARG_MAX leaves no room for history at all.
    huge_env = {"BIG": "x" * os.sysconf("SC_ARG_MAX")}
    assert environment_bytes(huge_env) > os.sysconf("SC_ARG_MAX")
    assert preamble_budget("hi", huge_env) == 0
    assert build_prompt(_wide_history(3), "hi", budget=0) == "hi"


def test_lone_surrogates_are_counted_not_fatal() -> None:
    assert utf8_len("\ud800") == 3
    prompt = build_prompt([Exchange("q", "broken \ud800 text", "completed")], "next")
    assert "broken \ud800 text" in prompt
