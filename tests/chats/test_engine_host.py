"""The turn engine and a chat's host (issue 25): each turn's target is built from the chat's
host by the function ``tolaria run --host`` uses (the settings' ``[hosts."NAME"]`` applied,
BatchMode on); a host change is refused while a turn of the chat runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import async_test, wait_until

from tolaria.chats.engine import QuietObserver, TurnEngine
from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import Store
from tolaria.core.turns.request import RunRequest
from tolaria.support.tasks import TaskSet


@async_test
async def test_the_chats_host_makes_the_target_and_cannot_change_mid_turn(
        tolaria_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "30")
    (tolaria_home / "settings.toml").write_text(
        '[remote]\ndisconnect_seconds = 4\n[hosts."box"]\ncommand = "docker exec -i box"\n')
    store = Store(tmp_path / "tolaria.sqlite3")
    engine = TurnEngine(store, ProcessRegistry(), QuietObserver(), TaskSet(),
                        adapters=load_adapters(), grace_s=1.0)
    try:
        chat = engine.new_conversation("demo", str(tmp_path))
        local = engine._request(engine.plan(chat, "hi"))
        assert isinstance(local, RunRequest) and local.target is None
        assert engine.set_host(chat.id, "box", "~/src") is None
        moved = store.get_conversation(chat.id)
        assert moved is not None and (moved.host, moved.cwd) == ("box", "~/src")
        launch = engine.plan(moved, "hi")
        assert launch.cwd == "~/src", "the folder there, as typed"
        remote = engine._request(launch)
        assert isinstance(remote, RunRequest) and remote.target is not None
        assert remote.target.prefix == ("docker", "exec", "-i", "box")
        assert (remote.target.heartbeat_s, remote.target.interactive) == (4.0, False)
        # Parsed again for each turn: a host the parser refuses never runs anywhere.
        engine.set_host(chat.id, "ssh://devbox:0", None)
        bad = store.get_conversation(chat.id)
        assert bad is not None
        refused = engine._request(engine.plan(bad, "hi"))
        assert isinstance(refused, str) and "not a port number" in refused
        engine.set_host(chat.id, None, None)

        stream_id = engine.send(chat.id, "run a long tool")  # here, on this machine
        assert stream_id is not None
        refusal = engine.set_host(chat.id, "box", None)
        assert refusal is not None and "Stop the running turn" in refusal
        kept = store.get_conversation(chat.id)
        assert kept is not None and kept.host is None
        engine.stop_stream(stream_id)
        await wait_until(lambda: engine.running_stream(chat.id) is None, within=20,
                         what="the stop")
        assert engine.set_host(chat.id, "box", None) is None
    finally:
        await engine.shutdown()
        store.close()
