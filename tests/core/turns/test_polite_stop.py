"""The polite stop is not waited out when the agent cannot act on it: an agent that ignores the
polite signal (SigIgn in /proc/PID/status) goes straight to the tree kill, well before the
polite window ends (tolaria/core/turns/process_turn.py ``_signal_and_wait``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from core.turns.test_stream_input import start_tool_turn, stream_manifest
from helpers import assert_run_gone, async_test, fake_manifest, start_run

from tolaria.core.events import Diagnostic
from tolaria.core.process import procfs

pytestmark = pytest.mark.skipif(not procfs.HAS_PROC, reason="needs /proc to know SigIgn")


def ignored_notes(events: list[object]) -> list[str]:
    return [e.message for e in events if isinstance(e, Diagnostic) and " ignores SIG" in e.message]


@pytest.mark.parametrize("polite", ["sigint", "sigterm"])
@async_test
async def test_an_agent_ignoring_the_polite_signal_is_not_waited_for(
        tmp_path: Path, polite: str) -> None:
    window_s = 6.0
    run = start_run(fake_manifest("ignore_term", polite=polite, window_ms=int(window_s * 1000)),
                    cwd=tmp_path, grace_s=0.5)
    await run.wait_for_kind("text_delta")  # its signals are ignored from before its first line
    started = time.monotonic()
    assert run.abort()
    assert not run.abort(), "a second stop is a no-op"
    done = await run.finish()
    elapsed = time.monotonic() - started
    assert done.stop_reason == "cancelled"
    assert elapsed < window_s / 2, f"waited {elapsed:.1f} s of a {window_s:g} s polite window"
    assert ignored_notes(list(run.collector.events)) == [
        f"Fake agent (ignore_term) ignores {polite.upper()}; ending its processes without waiting"]
    assert_run_gone(run.stream_id)


@async_test
async def test_an_agent_honouring_the_polite_signal_gets_no_note(tmp_path: Path) -> None:
    run = start_run(fake_manifest("hang", polite="sigint", window_ms=6000), cwd=tmp_path)
    await run.wait_for_kind("init")
    assert run.abort()
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert ignored_notes(list(run.collector.events)) == []
    assert_run_gone(run.stream_id)


@async_test
async def test_stream_input_sigint_fallback_is_skipped_when_sigint_is_ignored(
        tmp_path: Path) -> None:
    """The interrupt goes unanswered (one window), then SIGINT, which the agent ignores: it is
    known to be ignored (the note), so no second window is given before the tree kill. (This
    fake also exits at stdin's EOF, so the time alone would not tell.)"""
    window_s = 2.5
    run, agent, tool = await start_tool_turn(tmp_path, stream_manifest(
        "--ignore-interrupt", "--ignore-sigint", window_ms=int(window_s * 1000)))
    started = time.monotonic()
    assert run.abort()
    done = await run.finish()
    elapsed = time.monotonic() - started
    assert done.stop_reason == "cancelled"
    assert elapsed < window_s * 1.6, f"took {elapsed:.1f} s: two polite windows were waited out"
    assert len(ignored_notes(list(run.collector.events))) == 1
    assert_run_gone(run.stream_id, [agent, tool])
