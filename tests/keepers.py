"""Helpers for kept-process tests: one conversation's turns on a ``KeeperPool``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from helpers import Collector, marker_pids

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import Done
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.keeper import KeeperPool, close_all_kept
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

KEY = "conversation-1"


class Chat:
    """One conversation's turns on a pool, as the controller runs them."""

    def __init__(self, manifest: Manifest, tmp_path: Path, pool: KeeperPool,
                 key: str = KEY) -> None:
        self.manifest = manifest
        self.tmp_path = tmp_path
        self.pool = pool
        self.key = key
        self.registry = ProcessRegistry()
        self.env = {"FAKE_LOG": str(tmp_path), "FAKE_PIDFILE": str(tmp_path / "pids")}

    def start(self, prompt: str, session_id: str | None = None, manifest: Manifest | None = None,
              cwd: Path | None = None, permission_mode: str | None = None,
              ) -> tuple[str, Collector, asyncio.Task[Done]]:
        sid, collector = new_stream_id(), Collector()
        request = RunRequest(manifest or self.manifest, prompt, str(cwd or self.tmp_path),
                             self.env, session_id=session_id, keep_key=self.key,
                             permission_mode=permission_mode)
        task = asyncio.ensure_future(stream_ai_agent(request, sid, collector,
                                                     registry=self.registry, grace_s=0.5,
                                                     keepers=self.pool))
        return sid, collector, task

    async def turn(self, prompt: str, **kwargs: Any) -> tuple[Done, Collector]:
        _, collector, task = self.start(prompt, **kwargs)
        done = await asyncio.wait_for(task, 15)
        assert collector.kinds().count("done") == 1 and collector.events[-1] is done
        return done, collector

    def pid(self) -> int:
        pid = self.pool.pid(self.key)
        assert pid is not None, "no kept process"
        return pid

    def marked(self) -> list[int]:
        keeper_sid = self.pool.stream_id(self.key)
        return marker_pids(keeper_sid) if keeper_sid else []

    def argv(self) -> list[str]:
        return list(json.loads((self.tmp_path / "argv.json").read_text()))


@asynccontextmanager
async def chat(manifest: Manifest, tmp_path: Path, **pool_args: Any) -> AsyncIterator[Chat]:
    pool = KeeperPool(grace_s=0.5, **pool_args)
    try:
        yield Chat(manifest, tmp_path, pool)
    finally:
        await close_all_kept(pool)
    assert pool.keys() == []
