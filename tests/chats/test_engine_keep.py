"""A chat's "keep running when disconnected" reaches its turns' target (ADR 0032), with the
settings' keep time and buffer; a chat on this machine has no target to keep."""

from __future__ import annotations

from pathlib import Path

from helpers import async_test

from tolaria.chats.engine import QuietObserver, TurnEngine
from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import Store
from tolaria.core.turns.request import RunRequest
from tolaria.support.tasks import TaskSet


@async_test
async def test_the_chats_keep_running_makes_a_kept_target(tolaria_home: Path,
                                                          tmp_path: Path) -> None:
    (tolaria_home / "settings.toml").write_text(
        '[remote]\nkeep_seconds = 600\n[hosts."box"]\ncommand = "docker exec -i box"\n'
        'keep_buffer_mb = 3\n')
    store = Store(tmp_path / "tolaria.sqlite3")
    engine = TurnEngine(store, ProcessRegistry(), QuietObserver(), TaskSet(),
                        adapters=load_adapters(), grace_s=1.0)
    try:
        chat = engine.new_conversation("demo", "~/src", host="box")
        plain = engine._request(engine.plan(chat, "hi"))
        assert isinstance(plain, RunRequest) and plain.target is not None
        assert plain.target.keep_running is False
        engine.set_keep_running(chat.id, True)
        saved = store.get_conversation(chat.id)
        assert saved is not None and saved.keep_running
        kept = engine._request(engine.plan(saved, "hi"))
        assert isinstance(kept, RunRequest) and kept.target is not None
        assert (kept.target.keep_running, kept.target.keep_s, kept.target.buffer_bytes) == (
            True, 600.0, 3 << 20)
        assert engine.reattach_kept() == [], "nothing left running to take back"
    finally:
        await engine.shutdown()
        store.close()
