"""Failures classified into a category and an actionable hint, from real captured CLI output.

Each capture (tests/fixtures/<cli>/) is fed through that CLI's runtime exactly as the runner
does, and the diagnosis is made from what the runtime reports (the final error, or the retry it
was stuck in), for the real built-in manifests.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.events import Error, event_from_dict, to_dict
from tolaria.core.runtimes import make_runtime
from tolaria.core.runtimes.base import Runtime
from tolaria.core.store.db import Store
from tolaria.core.turns.diagnose import (
    AUTH,
    NOT_INSTALLED,
    PERMISSION,
    RATE_LIMIT,
    UNKNOWN,
    UNREACHABLE,
    Agent,
    Diagnosis,
    classify,
    diagnose,
    retry_cutoff,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SID = "ai-agent-stream-diagnose"
MANIFESTS = load_adapters().manifests


def agent(cli: str) -> Agent:
    m = MANIFESTS[cli]
    return Agent(m.id, m.name, m.protocol, m.install_hint)


def replay(cli: str, fixture: str) -> Runtime:
    """Feed a capture through the CLI's runtime (stdout, and stderr when captured)."""
    runtime = make_runtime(MANIFESTS[cli].protocol, SID, cli)
    for line in (FIXTURES / cli / fixture).read_text().splitlines():
        runtime.feed(line)
    stderr = FIXTURES / cli / fixture.replace(".jsonl", ".stderr.txt")
    if stderr.exists():
        for line in stderr.read_text().splitlines():
            runtime.feed_stderr(line)
    runtime.finish()
    return runtime


def final_error(cli: str, fixture: str) -> str:
    outcome = replay(cli, fixture).outcome()
    assert outcome is not None and outcome.stop_reason == "error" and outcome.error
    return outcome.error


AUTH_CASES = [
    ("claude", "claude_401.jsonl", "Invalid API key",
     "Claude Code rejected the API key: set ANTHROPIC_API_KEY or run `claude` once to log in."),
    ("codex", "codex_401.jsonl", "401 Unauthorized",
     "Codex rejected the API key: set OPENAI_API_KEY (or your provider's env_key in "
     "~/.codex/config.toml) or run `codex login`."),
    ("gemini", "gemini_401.jsonl", "UNAUTHENTICATED",
     "Gemini CLI rejected the API key: set GEMINI_API_KEY or run `gemini` once to sign in."),
    ("qwen", "qwen_401.jsonl", "[API Error: 401",
     "Qwen Code rejected the API key: set OPENAI_API_KEY (with OPENAI_BASE_URL and OPENAI_MODEL) "
     "or run `qwen` once and sign in with /auth."),
    ("opencode", "opencode_401.jsonl", "(HTTP 401)",
     "opencode's provider rejected the API key: run `opencode auth login` or fix the provider's "
     "apiKey in opencode.json."),
]


@pytest.mark.parametrize(("cli", "fixture", "raw", "expected"), AUTH_CASES)
def test_a_rejected_key_is_auth_with_the_agents_own_advice(cli: str, fixture: str, raw: str,
                                                           expected: str) -> None:
    error = final_error(cli, fixture)
    assert raw in error
    diagnosis = diagnose(error, agent(cli))
    assert diagnosis.category == AUTH
    assert diagnosis.hint == expected


UNREACHABLE_FINAL = [
    ("claude", "claude_unreach.jsonl", "ECONNREFUSED", "ANTHROPIC_BASE_URL"),
    ("qwen", "qwen_unreach.jsonl", "ECONNREFUSED", "OPENAI_BASE_URL"),
    ("gemini", "gemini_unreach_end.jsonl", "fetch failed", "GOOGLE_GEMINI_BASE_URL"),
    ("opencode", "opencode_unreach.jsonl", "Cannot connect to API", "baseURL in opencode.json"),
]


@pytest.mark.parametrize(("cli", "fixture", "raw", "where"), UNREACHABLE_FINAL)
def test_a_refused_connection_that_ends_the_turn_is_unreachable(cli: str, fixture: str, raw: str,
                                                                where: str) -> None:
    error = final_error(cli, fixture)
    assert raw in error
    diagnosis = diagnose(error, agent(cli))
    assert diagnosis.category == UNREACHABLE
    assert diagnosis.hint.startswith(f"{MANIFESTS[cli].name} could not reach")
    assert where in diagnosis.hint


RETRYING = [
    ("codex", "codex_unreach.jsonl",
     "Reconnecting... waiting for network (Connection failed: error sending request)"),
    ("claude", "claude_retry.jsonl", "API retry 5 of 10: unknown"),
    ("gemini", "gemini_unreach.jsonl",
     "Attempt 2 failed. Retrying with backoff... Error: exception TypeError: fetch failed "
     "sending request"),
]


@pytest.mark.parametrize(("cli", "fixture", "detail"), RETRYING)
def test_a_cli_stuck_retrying_reports_it_and_is_cut_off_as_unreachable(cli: str, fixture: str,
                                                                       detail: str) -> None:
    runtime = replay(cli, fixture)
    assert runtime.outcome() is None, "the capture never ends the turn: it retries"
    assert runtime.retrying == detail
    message, diagnosis = retry_cutoff(agent(cli), 30, runtime.retrying)
    name = MANIFESTS[cli].name
    assert message.startswith(f"{name} could not reach the model for 30 s ({detail[:40]}")
    assert message.endswith("; stopped it. Check your network or the provider's base URL.")
    assert diagnosis.category == UNREACHABLE
    assert diagnosis.hint.startswith(f"{name} could not reach")


def test_the_codex_cutoff_message_reads_as_promised() -> None:
    message, _ = retry_cutoff(agent("codex"), 30, replay("codex", "codex_unreach.jsonl").retrying
                              or "")
    assert message == ("Codex could not reach the model for 30 s (Reconnecting... waiting for "
                       "network (Connection failed: error sending request)); stopped it. Check "
                       "your network or the provider's base URL.")


def test_progress_ends_a_retry_but_other_lines_do_not() -> None:
    runtime = make_runtime("codex-exec-json", SID, "codex")
    for line in (FIXTURES / "codex" / "codex_unreach.jsonl").read_text().splitlines():
        runtime.feed(line)
    assert runtime.retrying is not None
    runtime.feed('{"type":"turn.started"}')
    assert runtime.retrying is not None, "a line that shows no answer keeps the retry going"
    for line in (FIXTURES / "codex" / "codex_text.jsonl").read_text().splitlines():
        runtime.feed(line)
    assert runtime.retrying is None
    assert runtime.outcome() is not None and runtime.outcome().stop_reason == "end_turn"


def test_gemini_stderr_noise_does_not_count_as_a_retry() -> None:
    runtime = make_runtime("gemini-stream-json", SID, "gemini")
    runtime.feed_stderr("YOLO mode is enabled. All tool calls will be automatically approved.")
    runtime.feed_stderr("Ripgrep is not available. Falling back to GrepTool.")
    assert runtime.retrying is None


def test_claude_rate_limit_retries_are_rate_limit() -> None:
    runtime = make_runtime("claude-stream-json", SID, "claude")
    runtime.feed('{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,'
                 '"retry_delay_ms":2000,"error_status":429,"error":"rate_limit"}')
    assert runtime.retrying == "API retry 3 of 10: rate_limit, HTTP 429"
    message, diagnosis = retry_cutoff(agent("claude"), 60, runtime.retrying)
    assert diagnosis.category == RATE_LIMIT
    assert message.startswith("Claude Code was rate limited for 60 s (API retry 3 of 10")


@pytest.mark.parametrize(("text", "category"), [
    ("Please run /login · API Error: 401", AUTH),
    ("Not logged in · Please run /login", AUTH),
    ("Invalid auth method selected.", AUTH),
    ("API Error: 429 Too Many Requests", RATE_LIMIT),
    ("[API Error: {\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\"}}]", RATE_LIMIT),
    ("getaddrinfo ENOTFOUND api.example.invalid", UNREACHABLE),
    ("TypeError: fetch failed", UNREACHABLE),
    ("--dangerously-skip-permissions cannot be used with root/sudo privileges for security "
     "reasons", PERMISSION),
    ("Codex: program 'codex' not found on PATH. Install it with: npm install -g @openai/codex",
     NOT_INSTALLED),
    ("the model said something odd", UNKNOWN),
    ("exited with code 4010", UNKNOWN),
])
def test_classify(text: str, category: str) -> None:
    assert classify(text) == category


def test_claude_as_root_gets_the_root_advice() -> None:
    diagnosis = diagnose("--dangerously-skip-permissions cannot be used with root/sudo "
                         "privileges for security reasons", agent("claude"))
    assert diagnosis.category == PERMISSION
    assert "as root" in diagnosis.hint and "--allowedTools" in diagnosis.hint


def test_not_installed_names_the_install_command() -> None:
    diagnosis = diagnose("Qwen Code: program 'qwen' not found on PATH.", agent("qwen"))
    assert diagnosis == Diagnosis(NOT_INSTALLED, "Qwen Code is not installed or not on PATH: install it "
                                        "with `npm install -g @qwen-code/qwen-code`.")


def test_stderr_and_exit_code_are_used_only_when_the_message_says_nothing() -> None:
    opencode = agent("opencode")
    vague = "opencode exited with code 1 without a final result"
    assert diagnose(vague, opencode).category == UNKNOWN
    assert diagnose(vague, opencode).hint == ""
    assert diagnose(vague, opencode, ["Error: connect ECONNREFUSED 127.0.0.1:9"]).category \
        == UNREACHABLE
    assert diagnose(vague, opencode, exit_code=127).category == NOT_INSTALLED
    # The message wins over a noisy stderr tail.
    assert diagnose("Invalid API key", opencode, ["fetch failed"]).category == AUTH


def test_an_unknown_agent_gets_generic_advice_by_name() -> None:
    aider = Agent("aider", "Aider", "lines")
    assert diagnose("401 Unauthorized", aider).hint.startswith("Aider rejected its credentials")
    assert "base URL" in diagnose("ECONNREFUSED", aider).hint


# --- the Error event ---------------------------------------------------------------------------


def test_error_fields_round_trip_and_old_events_still_load() -> None:
    error = Error(SID, message="401", category=AUTH, hint="set the key")
    assert to_dict(error) == {"stream_id": SID, "kind": "error", "message": "401",
                              "category": AUTH, "hint": "set the key"}
    assert event_from_dict(to_dict(error)) == error
    old = event_from_dict({"stream_id": SID, "kind": "error", "message": "boom"})
    assert old == Error(SID, message="boom", category="", hint="")


def test_the_store_keeps_category_and_hint_and_reads_rows_written_before_them(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "chats.db")
    try:
        conversation = store.create_conversation("t", "codex", None)
        turn = store.start_turn(conversation.id, SID, "codex", "hi")
        error = Error(SID, message="unexpected status 401 Unauthorized", category=AUTH,
                      hint="Codex rejected the API key")
        store.append_event(error)
        store.flush()
        with sqlite3.connect(tmp_path / "chats.db") as conn:  # a row from before the fields
            conn.execute("INSERT INTO events (turn_id, seq, kind, payload, created_at)"
                         " VALUES (?, 99, 'error', ?, 0)",
                         (turn.id, f'{{"stream_id": "{SID}", "kind": "error", "message": "old"}}'))
        assert store.events(turn.id) == [error, Error(SID, message="old")]
    finally:
        store.close()
