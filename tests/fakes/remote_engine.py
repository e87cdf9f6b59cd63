"""The turn engine with a keep-running chat on a host, as the non-root local side (ADR 0032):
``python remote_engine.py start|quit|reattach JSON``.

``start``: a chat on ``host`` with "keep running when disconnected", one turn sent; prints its
stream id, then waits to be killed with -9 (the window killed mid-turn). ``reattach``: a new
engine on the same store loads the chats as the window does at start - the kept turn is
reattached instead of interrupted - lets it run ``stop_after`` seconds, stops it and prints the
stored turn: ``status``, ``stop_reason``, ``text``, ``errors``, ``survivors``; with ``delete``
the chat is deleted right after the start instead (the user in between: ``deleted``).
``quit``: a keep-running chat and a plain one on ``host``, a turn each; after ``run_for``
seconds the engine shuts down as the window's Quit does; prints both stream ids, what
``kept_at_quit`` said and how long the quit took.
JSON: ``db``, ``host``, ``cwd``, ``stream_id`` (reattach), ``stop_after``, ``run_for``;
``changes`` (reattach): also print the files the turn's checkpoints say it changed
(``changed``) and how many before-states it has (``befores``).
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
    if phase == "quit":
        return await _quit(engine, store, cfg)
    heard: list[TextDelta] = []
    shown = engine.gate.on_event

    def hear(event: Any) -> None:
        if isinstance(event, TextDelta):
            heard.append(event)
        shown(event)

    engine.gate.on_event = hear
    sid = cfg["stream_id"]
    engine.load()  # as the window at start: the kept turn is taken back
    turn = store.turn_by_stream(sid)
    assert turn is not None
    chat_id = turn.conversation_id
    if cfg.get("delete"):  # the user deletes the chat while it is being reattached
        engine.delete(chat_id)
        await _until(lambda: store.get_conversation(chat_id) is None, 30)
        await engine.shutdown()
        deleted = store.get_conversation(chat_id) is None and store.turn_by_stream(sid) is None
        store.close()
        return {"deleted": deleted}
    await _until(lambda: engine.running_stream(chat_id) == sid, 30)
    reattached = engine.running_stream(chat_id) == sid
    # Stopped once the replay has begun (or the turn ended: a run the host no longer has).
    await _until(lambda: bool(heard) or engine.running_stream(chat_id) is None, 30)
    await asyncio.sleep(float(cfg.get("stop_after", 1.5)))
    engine.stop_stream(sid)
    await _until(lambda: engine.running_stream(chat_id) is None, 30)
    checked: dict[str, Any] = {}
    if cfg.get("changes"):  # what the checkpoints say the turn changed, once recorded
        from tolaria.chats.checkpoints import MARKER_TURN_BEFORE

        service, turn_id = engine.checkpoints, turn.id
        assert service is not None

        def recorded() -> list[Any]:
            return [c for c in service.changes(chat_id) if c.turn_id == turn_id]

        await _until(lambda: bool(recorded()), 60)
        checked = {"changed": sorted(f.path for c in recorded() for f in c.files),
                   "befores": sum(1 for m in store.markers(chat_id, MARKER_TURN_BEFORE)
                                  if m.turn_id == turn_id)}
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
            "survivors": [[s.pid, s.name] for s in done[0].survivors] if done else None,
            **checked}


async def _quit(engine: Any, store: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    kept = engine.new_conversation("ticker", cfg["cwd"], host=cfg["host"])
    engine.set_keep_running(kept.id, True)
    plain = engine.new_conversation("ticker", cfg["cwd"], host=cfg["host"])
    kept_sid, plain_sid = engine.send(kept.id, "go"), engine.send(plain.id, "go")
    await _until(lambda: engine.registry.can_let_go(kept_sid), 30)
    await asyncio.sleep(float(cfg.get("run_for", 1.5)))
    said = engine.kept_at_quit()
    started = time.monotonic()
    await engine.shutdown()  # the window's Quit (and its SIGTERM path)
    took = time.monotonic() - started
    store.close()
    return {"kept": kept_sid, "plain": plain_sid, "kept_at_quit": said, "quit_s": took}


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
