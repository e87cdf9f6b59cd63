"""The turn engine with a keep-running chat on a host, as the non-root local side (ADR 0032):
``python remote_engine.py start|reattach JSON``.

``start``: a chat on ``host`` with "keep running when disconnected", one turn sent; prints its
stream id, then waits to be killed with -9 (the window killed mid-turn). ``reattach``: a new
engine on the same store loads the chats as the window does at start - the kept turn is
reattached instead of interrupted - lets it run ``stop_after`` seconds, stops it and prints the
stored turn: ``status``, ``stop_reason``, ``text``, ``errors``, ``survivors``.
JSON: ``db``, ``host``, ``cwd``, ``stream_id`` (reattach), ``stop_after``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Any


async def run(phase: str, cfg: dict[str, Any]) -> dict[str, Any]:
    from pathlib import Path

    from tolaria.chats.engine import QuietObserver, TurnEngine
    from tolaria.core.adapters.manifest import load_adapters
    from tolaria.core.events import Diagnostic, Done, Error, TextDelta
    from tolaria.core.process.registry import ProcessRegistry
    from tolaria.core.store.db import Store
    from tolaria.support.tasks import TaskSet

    store = Store(Path(cfg["db"]))
    engine = TurnEngine(store, ProcessRegistry(), QuietObserver(), TaskSet(),
                        adapters=load_adapters(), grace_s=0.5)
    if phase == "start":
        chat = engine.new_conversation("ticker", cfg["cwd"], host=cfg["host"])
        engine.set_keep_running(chat.id, True)
        sid = engine.send(chat.id, "go")
        print(json.dumps({"stream_id": sid}), flush=True)
        await asyncio.sleep(3600)  # the test kills us with -9
    sid = cfg["stream_id"]
    engine.load()  # as the window at start: the kept turn is taken back
    turn = store.turn_by_stream(sid)
    assert turn is not None
    chat_id = turn.conversation_id
    await _until(lambda: engine.running_stream(chat_id) == sid, 30)
    reattached = engine.running_stream(chat_id) == sid
    await asyncio.sleep(float(cfg.get("stop_after", 1.5)))
    engine.stop_stream(sid)
    await _until(lambda: engine.running_stream(chat_id) is None, 30)
    await engine.shutdown()
    turn = store.turn_by_stream(sid)
    assert turn is not None
    events = store.events(turn.id)
    store.close()
    done = [e for e in events if isinstance(e, Done)]
    return {"reattached": reattached, "status": turn.status, "stop_reason": turn.stop_reason,
            "text": "".join(e.text for e in events if isinstance(e, TextDelta)),
            "errors": [e.message for e in events if isinstance(e, Error)],
            "notes": [e.message for e in events if isinstance(e, Diagnostic)],
            "survivors": [[s.pid, s.name] for s in done[0].survivors] if done else None}


async def _until(done: Callable[[], bool], within: float) -> None:
    deadline = time.monotonic() + within
    for _ in range(int(within / 0.05)):
        if done() or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.05)


def main() -> int:
    print(json.dumps(asyncio.run(run(sys.argv[1], json.loads(sys.argv[2])))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
