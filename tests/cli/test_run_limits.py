"""``tolaria run --max-time/--max-cost/--max-tokens/--max-tool-calls`` and ``[limits]``: a run
that reaches a limit is stopped the normal way (polite, then the tree), keeps what it said,
ends ``cancelled`` with exit 130 and names the limit in its done event, in ``--json``, in the
text output and in the store; a warning at 80 % comes once. Real agents: a fake one that keeps
spending (tests/fakes/spend_agent.py, opencode's dialect with cost) and the demo agent."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from cli.test_cli import EXIT_CANCELLED, Background, json_lines, tolaria
from helpers import cli_env, marker_pids

from tolaria.chats.saved_runs import open_store
from tolaria.core.events import Diagnostic, Done, TextDelta, ToolStart
from tolaria.core.store.db import MARKER_STOP_REQUESTED
from tolaria.core.stream_id import new_stream_id

SPEND_AGENT = Path(__file__).resolve().parents[1] / "fakes" / "spend_agent.py"


def add_spend_agent(home: Path) -> str:
    folder = home / "adapters"
    folder.mkdir(exist_ok=True)
    (folder / "spend.toml").write_text(
        'id = "spend"\nname = "Spend"\nprotocol = "opencode-json"\n'
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(SPEND_AGENT))}, "
        '"{prompt}"]\n')
    return "spend"


def spend(home: Path, work: Path, *flags: str, json_out: bool = True,
          **env: str) -> tuple[int, list[dict[str, Any]] | str, str, str]:
    """One ``tolaria run`` of the spend agent: (exit code, events or text, stderr, stream)."""
    agent = add_spend_agent(home)
    stream_id = new_stream_id()
    args = ["run", *(["--json"] if json_out else []), "--grace", "0.5",
            "--stream-id", stream_id, *flags, "--agent", agent, "go"]
    result = tolaria(*args, env=cli_env(home, **env), cwd=work)
    assert marker_pids(stream_id) == []  # the tree is gone, the new-session sleep with it
    out = json_lines(result.stdout) if json_out else result.stdout
    return result.returncode, out, result.stderr, stream_id


def kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind]


def warnings(events: list[dict[str, Any]]) -> list[str]:
    return [e["message"] for e in kinds(events, "diagnostic") if e["source"] == "limit"]


def stored(stream_id: str) -> tuple[str, list[Any], list[Any]]:
    """The stored turn's status, its events and its conversation's stop markers."""
    store = open_store()
    try:
        turn = store.turn_by_stream(stream_id)
        assert turn is not None
        return (turn.status, store.events(turn.id),
                store.markers(turn.conversation_id, MARKER_STOP_REQUESTED))
    finally:
        store.close()


def test_tool_calls_limit_stops_the_run_keeps_its_output_and_says_which(
        tolaria_home: Path, work: Path) -> None:
    code, events, _err, stream_id = spend(tolaria_home, work, "--max-tool-calls", "3")
    assert isinstance(events, list)
    assert code == EXIT_CANCELLED
    assert [e["tool_id"] for e in kinds(events, "tool_start")] == ["call_1", "call_2", "call_3"]
    assert "step 3" in "".join(e["text"] for e in kinds(events, "text_delta"))
    assert warnings(events) == ["80 % of the 3 tool calls limit used"]
    done = events[-1]
    assert done["kind"] == "done"
    assert (done["stop_reason"], done["limit"], done["limit_value"]) == ("cancelled",
                                                                          "tool_calls", 3)
    status, saved, markers = stored(stream_id)
    assert status == "cancelled"
    assert isinstance(saved[-1], Done)
    assert (saved[-1].limit, saved[-1].limit_value) == ("tool_calls", 3)
    assert len([e for e in saved if isinstance(e, ToolStart)]) == 3
    assert [e.message for e in saved if isinstance(e, Diagnostic) and e.source == "limit"] \
        == ["80 % of the 3 tool calls limit used"]
    assert any(isinstance(e, TextDelta) and "step 1" in e.text for e in saved)
    assert [m.data.get("limit") for m in markers] == ["tool_calls"]


def test_cost_limit_counts_the_reported_totals(tolaria_home: Path, work: Path) -> None:
    # 0.25 $ a step: 0.25, 0.50, 0.75, 1.00 (80 % of 1.25: warned), 1.25 (reached).
    code, events, _err, _sid = spend(tolaria_home, work, "--max-cost", "1.25")
    assert isinstance(events, list)
    assert code == EXIT_CANCELLED
    assert warnings(events) == ["80 % of the $1.25 limit used"]
    assert [e["cost_usd"] for e in kinds(events, "usage")] == [0.25, 0.5, 0.75, 1.0, 1.25]
    assert (events[-1]["limit"], events[-1]["limit_value"]) == ("cost", 1.25)


def test_token_limit_in_the_text_output(tolaria_home: Path, work: Path) -> None:
    # 150 tokens a step: ... 750, 900 (80 % of 1000: warned), 1050 (reached).
    code, text, err, _sid = spend(tolaria_home, work, "--max-tokens", "1000", json_out=False)
    assert code == EXIT_CANCELLED
    assert "step 7" in text
    assert "step 8" not in text
    assert err.count("[80 % of the 1,000 tokens limit used]") == 1
    assert "stopped: 1,000 tokens limit reached]" in err


def test_time_limit_stops_the_demo_during_its_tool(tolaria_home: Path, work: Path) -> None:
    stream_id = new_stream_id()
    result = tolaria("run", "--json", "--grace", "0.5", "--stream-id", stream_id,
                     "--max-time", "1.5", "--agent", "demo", "hello",
                     env=cli_env(tolaria_home, TOLARIA_DEMO_TOOL_SECONDS="30"), cwd=work)
    assert result.returncode == EXIT_CANCELLED
    events = json_lines(result.stdout)
    assert marker_pids(stream_id) == []
    assert "run a command" in "".join(e["text"] for e in kinds(events, "text_delta"))
    assert warnings(events) == ["80 % of the 1.5 s limit used"]
    done = events[-1]
    assert (done["stop_reason"], done["limit"], done["limit_value"]) == ("cancelled", "time", 1.5)
    assert done["duration_ms"] < 10_000


def test_a_user_stop_names_no_limit(tolaria_home: Path, work: Path) -> None:
    agent = add_spend_agent(tolaria_home)
    stream_id = new_stream_id()
    runner = Background(["run", "--json", "--grace", "0.5", "--stream-id", stream_id,
                         "--max-time", "60", "--max-tool-calls", "500", "--agent", agent, "go"],
                        cli_env(tolaria_home), work)
    try:
        runner.wait_until(lambda: "call_2" in "".join(runner.stdout), "two tool calls")
        runner.proc.send_signal(signal.SIGINT)
        assert runner.finish() == EXIT_CANCELLED
        done = runner.events()[-1]
        assert (done["kind"], done["stop_reason"], done["limit"]) == ("done", "cancelled", None)
        assert marker_pids(stream_id) == []
        _status, saved, markers = stored(stream_id)
        assert isinstance(saved[-1], Done)
        assert saved[-1].limit is None
        assert [m.data.get("limit") for m in markers] == []  # Ctrl+C: no marker in tolaria run
    finally:
        runner.kill()


def test_a_run_that_ends_within_its_limits_is_not_stopped(tolaria_home: Path,
                                                          work: Path) -> None:
    code, events, _err, _sid = spend(tolaria_home, work, "--max-tool-calls", "3",
                                     SPEND_STEPS="3")
    assert isinstance(events, list)
    assert code == 0
    assert len(kinds(events, "tool_start")) == 3
    assert (events[-1]["stop_reason"], events[-1]["limit"]) == ("end_turn", None)


def test_settings_limits_apply_and_a_flag_of_zero_lifts_them(tolaria_home: Path,
                                                             work: Path) -> None:
    (tolaria_home / "settings.toml").write_text("[limits]\nmax_tool_calls = 2\n")
    code, events, _err, _sid = spend(tolaria_home, work)
    assert isinstance(events, list)
    assert code == EXIT_CANCELLED
    assert (events[-1]["limit"], events[-1]["limit_value"]) == ("tool_calls", 2)
    code, events, _err, _sid = spend(tolaria_home, work, "--max-tool-calls", "0",
                                     SPEND_STEPS="4")
    assert isinstance(events, list)
    assert code == 0
    assert len(kinds(events, "tool_start")) == 4


def test_a_bad_settings_limit_is_named_with_its_line(tolaria_home: Path, work: Path) -> None:
    (tolaria_home / "settings.toml").write_text("[limits]\n\nmax_cost_usd = -2\n")
    code, _events, err, _sid = spend(tolaria_home, work, SPEND_STEPS="2")
    assert code == 0
    assert "settings.toml:3: limits.max_cost_usd: must be a number of US dollars" in err


@pytest.mark.parametrize(("flag", "value"), [("--max-time", "soon"), ("--max-cost", "-1"),
                                             ("--max-tokens", "1.5"),
                                             ("--max-tool-calls", "lots"),
                                             ("--max-cost", "nan")])
def test_bad_limit_values_are_bad_input_in_one_line(tolaria_home: Path, work: Path, flag: str,
                                                    value: str) -> None:
    result = tolaria("run", flag, value, "--agent", "demo", "hi", env=cli_env(tolaria_home),
                     cwd=work)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"tolaria: {flag} must be ")
    assert repr(value) in result.stderr
