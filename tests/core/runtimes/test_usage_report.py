"""What the runtimes report of a turn's usage: Claude's per-message usage, result totals,
context window and rate-limit events; Codex's cached tokens, and its context window and rate
limits read from its own session file (real captured output, tests/fixtures/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import parse_fixture

from tolaria.core import ratelimits
from tolaria.core.events import Event, Usage
from tolaria.core.runtimes import make_runtime

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SID = "ai-agent-stream-test"
ROLLOUT = (FIXTURES / "sessions_live/codex/final/.codex/sessions/2026/12/03/"
           "rollout-2026-12-03T13-27-07-01a23c16-59c7-7f93-8ef8-8a513f6c73ee.jsonl")
THREAD = "01a23c16-59c7-7f93-8ef8-8a513f6c73ee"


def usages(events: list[Event]) -> list[Usage]:
    return [e for e in events if isinstance(e, Usage)]


def feed(protocol: str, lines: list[object], env: dict[str, str] | None = None) -> list[Event]:
    rt = make_runtime(protocol, SID, protocol.split("-")[0])
    rt.agent_env = env or {}
    events: list[Event] = []
    for line in lines:
        events.extend(rt.feed(line if isinstance(line, str) else json.dumps(line)))
    return events + rt.finish()


def test_claude_capture_reports_the_models_context_window() -> None:
    events, _ = parse_fixture("claude", "claude_text.jsonl", "claude-stream-json", SID)
    last = usages(events)[-1]
    assert (last.input_tokens, last.output_tokens) == (10, 12)
    assert last.cost_usd == pytest.approx(0.00028)
    assert last.context_window == 1_000_000  # modelUsage[model].contextWindow
    assert last.context_tokens == 11  # the last API message: 10 in + 1 out, as it printed it
    assert (last.cache_read_tokens, last.cache_write_tokens) == (0, 0)


def _assistant(mid: str, inp: int, out: int, read: int, write: int) -> dict[str, object]:
    return {"type": "assistant", "message": {
        "id": mid, "model": "claude-x", "content": [{"type": "text", "text": "hi"}],
        "usage": {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": read,
                  "cache_creation_input_tokens": write}}}


def test_claude_messages_then_result_and_rate_limits() -> None:
    events = feed("claude-stream-json", [
        _assistant("m1", 5, 20, 1000, 50),
        _assistant("m1", 5, 20, 1000, 50),  # the same message, another content block
        {"type": "rate_limit_event", "rate_limit_info": {
            "status": "allowed_warning", "rateLimitType": "five_hour", "utilization": 0.82,
            "resetsAt": 1_800_000_000}},
        _assistant("m2", 7, 30, 1050, 0),
        {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}},  # says nothing
        {"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.1,
         "usage": {"input_tokens": 12, "output_tokens": 50, "cache_read_input_tokens": 2050,
                   "cache_creation_input_tokens": 50},
         "modelUsage": {"claude-haiku": {"contextWindow": 100},
                        "claude-x": {"contextWindow": 200_000}}},
    ])
    seen = usages(events)
    assert [(u.input_tokens, u.output_tokens, u.cache_read_tokens) for u in seen] == [
        (5, 20, 1000), (5, 20, 1000), (12, 50, 2050), (12, 50, 2050)]
    assert seen[1].rate_limits == [{"name": "five_hour", "used_percent": pytest.approx(82.0),
                                    "resets_at": 1_800_000_000, "status": "allowed_warning"}]
    last = seen[-1]
    assert last.context_tokens == 7 + 30 + 1050  # the last request: its prompt and answer
    assert last.context_window == 200_000  # of the turn's model, not the helper model's
    assert last.cost_usd == pytest.approx(0.1) and last.rate_limits == seen[1].rate_limits


def test_codex_context_and_rate_limits_come_from_its_session_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    day = tmp_path / "sessions" / "2026" / "12" / "03"
    day.mkdir(parents=True)
    rollout = day / ROLLOUT.name
    shutil.copy(ROLLOUT, rollout)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    lines: list[object] = [
        {"type": "thread.started", "thread_id": THREAD},
        {"type": "turn.completed", "usage": {"input_tokens": 24, "cached_input_tokens": 8,
                                             "output_tokens": 14}}]
    first = usages(feed("codex-exec-json", lines))
    assert (first[0].cache_read_tokens, first[0].context_window) == (8, None)
    last = first[-1]  # the captured file: the window, and no limits reported (all null)
    assert (last.input_tokens, last.context_tokens, last.context_window) == (24, 19, 258_400)
    assert last.rate_limits is None

    with rollout.open("a") as f:  # a plan that reports its windows
        f.write(json.dumps({"type": "event_msg", "payload": {
            "type": "token_count",
            "info": {"last_token_usage": {"input_tokens": 900, "output_tokens": 100,
                                          "total_tokens": 1000},
                     "model_context_window": 272_000},
            "rate_limits": {"primary": {"used_percent": 12.5, "window_minutes": 300,
                                        "resets_at": 1_900_000_000},
                            "secondary": {"used_percent": 3.0, "window_minutes": 10080,
                                          "resets_in_seconds": 3600},
                            "plan_type": "plus"}}}) + "\n")
    monkeypatch.delenv("CODEX_HOME")  # the agent's own environment says it (Preferences)
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    last = usages(feed("codex-exec-json", lines, {"CODEX_HOME": str(tmp_path)}))[-1]
    assert (last.context_tokens, last.context_window) == (1000, 272_000)
    names = [(w["name"], w["used_percent"]) for w in last.rate_limits]
    assert names == [("five_hour", 12.5), ("seven_day", 3.0)]
    assert "5-hour limit: 12 % used" in ratelimits.describe(last.rate_limits[0])


def test_codex_without_its_session_file_says_only_tokens(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "none"))
    events = feed("codex-exec-json", [
        {"type": "thread.started", "thread_id": THREAD},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 2}}])
    assert [(u.input_tokens, u.context_window) for u in usages(events)] == [(1, None)]


def test_rate_limit_words() -> None:
    window = {"name": "seven_day", "used_percent": 99.6, "resets_at": 1000 + 3 * 3600,
              "status": "rejected"}
    assert ratelimits.describe(window, now=1000) == "weekly limit: 100 % used, reached, resets in 3 h"
    assert ratelimits.from_claude({"rateLimitType": "five_hour", "resetsAt": 1_800_000_000_000,
                                   "utilization": 45})[0]["resets_at"] == 1_800_000_000
    assert ratelimits.from_codex({"primary": None, "secondary": {}}) == []
