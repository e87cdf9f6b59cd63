"""Letting a kept run go at quit (ADR 0032, "Quit"), the pieces without a host: the registry
lets go only a spawned run whose turn said how (a kept remote link), and no abort reaches it
after; the gate stores what the run said before and nothing after, not even its Done.
A whole quit in a process that exits, through a command target here; through a real host:
tests/remote/test_keep_quit.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
from helpers import cli_env

from tolaria.chats.engine.gate import StreamGate
from tolaria.core.events import Done, Event, TextDelta
from tolaria.core.process.registry import RUNNING, ProcessRegistry
from tolaria.core.stream_id import new_stream_id

FAKES = Path(__file__).resolve().parents[1] / "fakes"
ENGINE, FAKE_AGENT = FAKES / "remote_engine.py", FAKES / "fake_agent.py"


def test_only_a_spawned_run_with_a_way_to_let_go_is_let_go_and_no_abort_follows() -> None:
    async def scenario() -> None:
        registry = ProcessRegistry()
        run = registry.reserve(new_stream_id(), "demo")
        let_go: list[bool] = []
        try:
            assert not registry.can_let_go(run.stream_id), "not spawned yet"
            assert not registry.detach(run.stream_id)
            registry.transition(run, RUNNING)
            assert not registry.detach(run.stream_id), "not a kept link: it is stopped"
            run.let_go = lambda: let_go.append(True)
            assert registry.can_let_go(run.stream_id)
            assert registry.detach(run.stream_id)
            assert not registry.detach(run.stream_id), "once"
            assert not registry.abort(run.stream_id), "a run let go is not stopped after"
            assert registry.abort_all() == []
            await asyncio.sleep(0)
            assert let_go == [True] and run.detached and not run.stop_requested
        finally:
            registry.unregister(run)

    asyncio.run(scenario())


def test_the_gate_keeps_what_was_said_and_forgets_the_rest() -> None:
    stored: list[Event] = []
    finished: list[str] = []
    gate = StreamGate(batch=True, schedule=lambda: None)
    gate.record = stored.append
    gate.on_finished = lambda stream_id, _done: finished.append(stream_id)
    sid = new_stream_id()
    deliver = gate.open_stream(sid)
    deliver(TextDelta(sid, text="said before the quit"))
    gate.forget(sid)
    deliver(TextDelta(sid, text="after"))
    deliver(Done(sid, stop_reason="error"))
    assert [e.text for e in stored if isinstance(e, TextDelta)] == ["said before the quit"]
    assert not any(isinstance(e, Done) for e in stored) and finished == []
    assert not gate.is_live(sid)


def _marked(stream_id: str) -> list[psutil.Process]:
    needle = f"TOLARIA_STREAM_ID={stream_id}"
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if needle in (f"{k}={v}" for k, v in proc.environ().items()) and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def test_a_quit_process_leaves_the_kept_run_to_its_next_start_watchdog_and_all(
        tmp_path: Path) -> None:
    """The whole quit in a real process that then exits, with a command target on this
    machine (``env``): its watchdog, which ends a dead app's runs by their marker (here the
    kept run's too), has forgotten the run let go; the next process takes it back and stops
    it, nothing left."""
    home = tmp_path / "home"
    (home / "adapters").mkdir(parents=True)
    (home / "adapters" / "ticker.toml").write_text(
        f'id = "ticker"\nname = "Ticker"\nprotocol = "claude-stream-json"\n'
        f'command = ["{sys.executable}", "{FAKE_AGENT}", "ticker", "{{prompt}}"]\n'
        f'[env]\nFAKE_TICK_S = "0.01"\n')
    (home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\n')
    cfg = {"db": str(home / "store.sqlite3"), "host": "box", "cwd": str(tmp_path)}
    env = cli_env(home)
    sids: list[str] = []
    try:
        quit_ = subprocess.run([sys.executable, str(ENGINE), "quit", json.dumps(cfg)], env=env,
                               capture_output=True, text=True, timeout=60, check=False)
        assert quit_.returncode == 0, quit_.stderr[-3000:]
        out = json.loads(quit_.stdout.strip().splitlines()[-1])
        sids = [out["kept"], out["plain"]]
        assert out["kept_at_quit"] == {out["kept"]: "box"}, out
        time.sleep(2.0)  # the quit process is gone, and its watchdog has looked
        assert _marked(out["plain"]) == []
        kept = _marked(out["kept"])
        assert any("ticker" in " ".join(p.cmdline()) for p in kept), "the kept run was ended"
        assert not any("tolaria.core.remote.link" in " ".join(p.cmdline()) for p in kept)
        again = subprocess.run([sys.executable, str(ENGINE), "reattach",
                                json.dumps({**cfg, "stream_id": out["kept"]})], env=env,
                               capture_output=True, text=True, timeout=60, check=False)
        assert again.returncode == 0, again.stderr[-3000:]
        result = json.loads(again.stdout.strip().splitlines()[-1])
        assert (result["status"], result["survivors"]) == ("cancelled", []), result
        assert result["text"].startswith("tick 0\n"), result["text"][:100]
        assert _marked(out["kept"]) == []
    finally:
        for sid in sids:
            for proc in _marked(sid):
                with contextlib.suppress(psutil.Error):
                    proc.kill()
