"""A CLI that keeps retrying an unreachable model is cut off after ``retry_limit_s``.

The agents are real processes (tests/fakes/retry_agent.py) printing the real captured retry
lines of Codex, Claude and Gemini, with a ``sleep`` tool in its own session that the cut-off must
take down with them, exactly as a Stop would.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import (
    Collector,
    LiveRun,
    assert_run_gone,
    async_test,
    is_gone,
    wait_pidfile,
    wait_until,
)

from tolaria.config.settings import Settings, load_settings, save_settings
from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.events import Diagnostic, Error
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.diagnose import UNREACHABLE
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RETRY_AGENT = Path(__file__).resolve().parents[2] / "fakes" / "retry_agent.py"
GRACE_S = 0.5
PROTOCOLS = {"codex": ("Codex", "codex-exec-json"), "claude": ("Claude Code", "claude-stream-json"),
             "gemini": ("Gemini CLI", "gemini-stream-json"), "qwen": ("Qwen Code", "qwen-stream-json")}


def retry_manifest(cli: str, fixture: str, *extra: str) -> Manifest:
    name, protocol = PROTOCOLS[cli]
    return Manifest(id=cli, name=name, protocol=protocol,
                    command=(sys.executable, str(RETRY_AGENT), str(FIXTURES / cli / fixture),
                             *extra, "{prompt}"),
                    stop=StopPolicy(polite="sigint", polite_window_ms=300))


def start(manifest: Manifest, tmp_path: Path, retry_limit_s: float | None) -> LiveRun:
    """``helpers.start_run`` with a retry limit; the fake writes its pids to tmp_path/pids."""
    registry, stream_id, collector = ProcessRegistry(), new_stream_id(), Collector()
    request = RunRequest(manifest, "hi", str(tmp_path), {"FAKE_PIDFILE": str(tmp_path / "pids")},
                         retry_limit_s=retry_limit_s)
    task = asyncio.ensure_future(
        stream_ai_agent(request, stream_id, collector, registry=registry, grace_s=GRACE_S))
    return LiveRun(stream_id, registry, collector, task)


def retry_notices(collector: Collector) -> list[str]:
    return [e.message for e in collector.events
            if isinstance(e, Diagnostic) and e.source == "retry"]


@async_test
async def test_codex_reconnecting_for_ever_is_cut_off_with_a_clear_error(tmp_path: Path) -> None:
    t0 = time.monotonic()
    run = start(retry_manifest("codex", "codex_unreach.jsonl"), tmp_path, retry_limit_s=1)
    procs = await wait_pidfile(tmp_path / "pids")
    assert len(procs) == 2, "the agent and its sleep tool"
    done = await run.finish(within=15)
    elapsed = time.monotonic() - t0
    assert done.stop_reason == "error", "cut off is a failure, not a user's stop"
    error, = run.collector.of("error")
    assert isinstance(error, Error)
    assert error.message == ("Codex could not reach the model for 1 s (Reconnecting... waiting "
                             "for network (Connection failed: error sending request)); stopped "
                             "it. Check your network or the provider's base URL.")
    assert error.category == UNREACHABLE
    assert error.hint.startswith("Codex could not reach the model: check your network")
    # Started printing at once, retried every 100 ms: cut at ~1 s, the tree gone within grace.
    print(f"cut off after {elapsed:.2f} s")
    assert elapsed < 1 + GRACE_S + 4, elapsed
    notice, = retry_notices(run.collector)
    assert notice.startswith("Codex is retrying: Reconnecting... waiting for network")
    assert notice.endswith("Tolaria stops it if it is still retrying after 1 s.")
    assert run.collector.events.index(
        next(e for e in run.collector.events if isinstance(e, Diagnostic) and e.source == "retry")
    ) < run.collector.events.index(error)
    assert done.survivors == ()
    assert_run_gone(run.stream_id, procs)
    assert is_gone(procs[1]), "the sleep tool (own session) went with the agent"


#: Gemini retries on stderr only; Claude prints ``system/api_retry`` lines on stdout.
_OTHER_RETRIERS = [
    pytest.param(("gemini", "gemini_unreach.jsonl", "--stderr",
                  str(FIXTURES / "gemini" / "gemini_unreach.stderr.txt"), "--every", "0.3"),
                 "Gemini CLI could not reach the model for 1 s (Attempt 1 failed. Retrying with "
                 "backoff...", "GOOGLE_GEMINI_BASE_URL", id="gemini-stderr-only"),
    pytest.param(("claude", "claude_retry.jsonl", "--every", "0.5"),
                 "Claude Code could not reach the model for 1 s (API retry 5 of 10: unknown)",
                 "ANTHROPIC_BASE_URL", id="claude-api-retry"),
]


@pytest.mark.parametrize(("agent", "message", "hint_names"), _OTHER_RETRIERS)
@async_test
async def test_gemini_and_claude_retrying_is_cut_off(tmp_path: Path, agent: tuple[str, ...],
                                                     message: str, hint_names: str) -> None:
    run = start(retry_manifest(*agent), tmp_path, retry_limit_s=1)
    procs = await wait_pidfile(tmp_path / "pids")
    done = await run.finish(within=15)
    assert done.stop_reason == "error"
    error, = run.collector.of("error")
    assert isinstance(error, Error) and error.category == UNREACHABLE
    assert error.message.startswith(message)
    assert hint_names in error.hint
    assert_run_gone(run.stream_id, procs)


@async_test
async def test_an_agent_that_recovers_before_the_limit_is_not_cut_off(tmp_path: Path) -> None:
    manifest = retry_manifest("codex", "codex_unreach.jsonl", "--recover-after", "0.6",
                              "--then", str(FIXTURES / "codex" / "codex_text.jsonl"))
    run = start(manifest, tmp_path, retry_limit_s=3)
    procs = await wait_pidfile(tmp_path / "pids")
    done = await run.finish(within=15)
    assert done.stop_reason == "end_turn"
    assert "error" not in run.collector.kinds()
    assert run.collector.text() == "Hello from the fake model!"
    started, recovered = retry_notices(run.collector)
    assert started.startswith("Codex is retrying")
    assert recovered.startswith("Codex got through after retrying for ")
    assert_run_gone(run.stream_id, procs)


@async_test
async def test_limit_zero_never_cuts_off_and_a_stop_is_still_a_stop(tmp_path: Path) -> None:
    for limit in (0, None):
        (tmp_path / str(limit)).mkdir()
        run = start(retry_manifest("codex", "codex_unreach.jsonl"), tmp_path / str(limit), limit)
        procs = await wait_pidfile(tmp_path / str(limit) / "pids")
        await wait_until(lambda: retry_notices(run.collector), 10,  # noqa: B023 (awaited here)
                         "the retry notice")
        notice, = retry_notices(run.collector)
        assert "Tolaria stops it" not in notice
        t_end = time.monotonic() + 2
        await wait_until(lambda: time.monotonic() > t_end, 5,  # noqa: B023 (awaited here)
                         "2 s of retrying")
        assert run.state() == "running", "still retrying after twice a 1 s limit would have cut"
        assert run.abort()
        done = await run.finish()
        assert done.stop_reason == "cancelled"
        assert "error" not in run.collector.kinds()
        assert_run_gone(run.stream_id, procs)


@async_test
async def test_a_users_stop_while_retrying_is_cancelled_not_an_error(tmp_path: Path) -> None:
    run = start(retry_manifest("codex", "codex_unreach.jsonl"), tmp_path, retry_limit_s=30)
    procs = await wait_pidfile(tmp_path / "pids")
    await wait_until(lambda: retry_notices(run.collector), 10, "the retry notice")
    assert run.abort()
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert "error" not in run.collector.kinds()
    assert_run_gone(run.stream_id, procs)


@async_test
async def test_a_silent_agent_is_not_cut_off_by_the_retry_limit(tmp_path: Path) -> None:
    """Qwen retries an unreachable model without printing anything for ~100 s (docs/retries.md):
    silence is not a reported retry, so only a Stop (or the window's no-output watchdog) ends it."""
    # The capture's first two lines (init, goal_state), then nothing: the silent part.
    manifest = retry_manifest("qwen", "qwen_unreach.jsonl", "--head", "2", "--every", "3600")
    run = start(manifest, tmp_path, retry_limit_s=0.5)
    procs = await wait_pidfile(tmp_path / "pids")
    await run.wait_for_kind("init")
    t_end = time.monotonic() + 1.5
    await wait_until(lambda: time.monotonic() > t_end, 5, "1.5 s")
    assert run.state() == "running"
    assert not retry_notices(run.collector)
    assert run.abort()
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert_run_gone(run.stream_id, procs)


def test_the_default_limit_is_60_s() -> None:
    assert RunRequest(retry_manifest("codex", "codex_unreach.jsonl"), "hi").retry_limit_s == 60


def test_the_setting_is_read_checked_and_saved(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    assert load_settings(path)[0].retry_limit_seconds == 60
    path.write_text("[behaviour]\nretry_limit_seconds = 0\nwatchdog_seconds = 5\n")
    settings, problems = load_settings(path)
    assert (settings.retry_limit_seconds, settings.watchdog_seconds, problems) == (0, 5, [])
    for bad in ("-1", '"soon"', "true", "nan"):
        path.write_text(f"[behaviour]\nretry_limit_seconds = {bad}\n")
        settings, problems = load_settings(path)
        assert settings.retry_limit_seconds == 60
        assert len(problems) == 1 and "behaviour.retry_limit_seconds: must be a number" in problems[0]
    save_settings(replace(Settings(), retry_limit_seconds=12.5), path)
    assert load_settings(path) == (replace(Settings(), retry_limit_seconds=12.5), [])
