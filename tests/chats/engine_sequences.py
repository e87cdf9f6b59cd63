"""Scripted turn sequences, run through the window's controller (tests/ui/test_engine_parity.py)
and, as a separate process, through the turn engine the way ``tolaria run`` drives it (its
store, the default registry, its printer observer): ``python engine_sequences.py DB FOLDER
OUT NAME...`` runs the named sequences on the store DB, each in a new chat working in FOLDER,
and writes ``{name: chat id}`` to OUT. ``summary`` reads back what a chat stored, ids and times
left out, so both front ends' stores can be compared as they are.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if __name__ == "__main__":  # run as a script: this checkout and tests/ first
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers import marker_pids, tool_sleeping, wait_until  # noqa: E402

from tolaria.core.events import TextDelta, ToolStart  # noqa: E402
from tolaria.core.store.db import Store  # noqa: E402

#: A step: (action, argument). Waits: ``tool`` (the running turn's tool sleeps), ``turns``
#: (that many turns, none running, nothing about to start), ``gone`` (the chat deleted, its run's
#: processes gone). Actions: ``env`` (``KEY=VALUE`` for the next spawned agents), ``agent``,
#: ``send``, ``stop``, ``restart``, ``retry`` (the last sent turn, with this prompt), ``queue``,
#: ``delete``.
Step = tuple[str, str]

SEQUENCES: dict[str, list[Step]] = {
    "send": [("env", "TOLARIA_DEMO_TOOL_SECONDS=0"), ("send", "hello there"), ("turns", "1"),
             ("send", "and again"), ("turns", "2")],
    "stop": [("env", "TOLARIA_DEMO_TOOL_SECONDS=60"), ("send", "stop me"), ("tool", ""),
             ("stop", ""), ("turns", "1")],
    "restart": [("env", "TOLARIA_DEMO_TOOL_SECONDS=60"), ("send", "restart me"), ("tool", ""),
                ("env", "TOLARIA_DEMO_TOOL_SECONDS=0"), ("restart", ""), ("turns", "2")],
    "retry": [("agent", "broken"), ("send", "retry me"), ("turns", "1"), ("agent", "demo"),
              ("env", "TOLARIA_DEMO_TOOL_SECONDS=0"), ("retry", "retry me, edited"),
              ("turns", "2")],
    "queue": [("env", "TOLARIA_DEMO_TOOL_SECONDS=3"), ("send", "first"), ("tool", ""),
              ("queue", "second"), ("queue", "third"), ("env", "TOLARIA_DEMO_TOOL_SECONDS=0"),
              ("turns", "2")],
    "delete": [("env", "TOLARIA_DEMO_TOOL_SECONDS=60"), ("send", "delete me"), ("tool", ""),
               ("delete", ""), ("gone", "")],
}

#: An agent whose program does not exist: its turn fails at once.
BROKEN_ADAPTER = 'id = "broken"\nprotocol = "lines"\ncommand = ["/nonexistent/tolaria-agent"]\n'


def add_broken_adapter(home: Path) -> None:
    (home / "adapters").mkdir(parents=True, exist_ok=True)
    (home / "adapters" / "broken.toml").write_text(BROKEN_ADAPTER)


class Chat:
    """One sequence on one chat of a front end: ``target`` is the window's ChatController or
    the TurnEngine (the same method names)."""

    def __init__(self, target: Any, store: Store, conversation_id: int) -> None:
        self.target, self.store, self.id = target, store, conversation_id
        self.last: str | None = None

    def act(self, action: str, arg: str) -> None:
        if action == "env":
            key, _, value = arg.partition("=")
            os.environ[key] = value
        elif action == "agent":
            self.target.set_agent(self.id, arg)
        elif action == "send":
            self.last = self.target.send(self.id, arg)
            assert self.last is not None, f"{arg!r} did not start"
        elif action == "stop":
            assert self.target.stop(self.id)
        elif action == "restart":
            assert self.target.restart(self.id)
        elif action == "retry":
            assert self.last is not None
            self.last = self.target.retry(self.id, self.last, arg)
            assert self.last is not None
        elif action == "queue":
            assert self.target.queue(self.id, arg) is not None
        elif action == "delete":
            self.target.delete(self.id)
        else:
            raise ValueError(f"unknown step {action!r}")

    def waiting(self, action: str, arg: str) -> Callable[[], bool] | None:
        """The condition a wait step waits for (None: not a wait)."""
        if action == "tool":
            return self._tool_running
        if action == "turns":
            return lambda: self._settled(int(arg))
        if action == "gone":
            return lambda: (self.store.get_conversation(self.id) is None and self.last is not None
                            and not marker_pids(self.last))
        return None

    def _tool_running(self) -> bool:
        """The demo's tool sleeps and its card is stored: all the text before it went by."""
        if self.last is None or not tool_sleeping(self.last):
            return False
        turn = self.store.turn_by_stream(self.last)
        return turn is not None and any(isinstance(e, ToolStart)
                                        for e in self.store.events(turn.id))

    def _settled(self, turns: int) -> bool:
        if self.target.running_stream(self.id) is not None:
            return False
        stored = self.store.turns(self.id)
        return len(stored) == turns and all(t.status != "running" for t in stored)


def summary(store: Store, conversation_id: int) -> dict[str, Any]:
    """What the store keeps of a chat, comparable across stores: ids become turn numbers."""
    conversation = store.get_conversation(conversation_id)
    if conversation is None:
        return {"deleted": True, "turns": store.turns(conversation_id)}
    turns = store.turns(conversation_id)
    number = {t.id: i for i, t in enumerate(turns)}
    streams = {t.stream_id: f"turn{i}" for i, t in enumerate(turns)}

    def plain(value: Any) -> Any:
        if isinstance(value, dict):  # queued message ids, snapshot commits: ids
            return {k: (0 if k == "id" else "<commit>" if k in ("before", "after") else plain(v))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return streams.get(value, value) if isinstance(value, str) else value

    sessions = {t.session_id for t in turns if t.session_id}

    def text_of(turn_id: int) -> str:
        text = "".join(e.text for e in store.events(turn_id) if isinstance(e, TextDelta))
        for session in sessions:  # the agent's own (random) session id
            text = text.replace(session, "<session>").replace(session[:8], "<session>")
        return text

    state = store.queue_state(conversation_id)
    return {
        "title": conversation.title, "agent": conversation.agent, "cwd": conversation.cwd,
        "turns": [{"prompt": t.prompt, "status": t.status, "agent": t.agent,
                   "text": text_of(t.id)} for t in turns],
        "markers": [(m.kind, number.get(m.turn_id) if m.turn_id is not None else None,
                     plain(m.data)) for m in store.markers(conversation_id)],
        "queue": {"paused": state.paused, "reason": state.reason,
                  "messages": [m.text for m in state.messages]},
    }


async def _run_engine(db: Path, folder: str, names: list[str]) -> dict[str, int]:
    """The sequences through the turn engine as ``tolaria run`` builds it (its store, the
    default registry, its printer observer), with a queue."""
    from tolaria.chats.engine import TurnEngine
    from tolaria.chats.saved_runs import open_store
    from tolaria.cli.run_observer import PrinterObserver
    from tolaria.cli.tty import make_printer
    from tolaria.core.adapters.manifest import load_adapters
    from tolaria.core.process.registry import default_registry
    from tolaria.support.tasks import TaskSet

    store = open_store(db)
    printer = make_printer(True)
    observer = PrinterObserver(printer, printer, asyncio.get_running_loop())
    engine = TurnEngine(store, default_registry(), observer, TaskSet(), adapters=load_adapters(),
                        grace_s=1.0)
    engine.load()  # at start: the crash recovery of the queues
    for conversation in store.list_conversations():  # each chat opened, as the window does
        engine.open_changes(conversation.id)  # a turn a crash left mid-way: its late after-state
    await engine.tasks.wait()
    chats = {}
    try:
        for name in names:
            chat = Chat(engine, store, engine.new_conversation("demo", folder).id)
            chats[name] = chat.id
            for action, arg in SEQUENCES[name]:
                condition = chat.waiting(action, arg)
                if condition is None:
                    chat.act(action, arg)
                else:
                    await wait_until(condition, within=60, what=f"{name}: {action} {arg}")
    finally:
        await engine.shutdown()
        store.close()
    return chats


def main(argv: list[str]) -> int:
    db, folder, out, *names = argv
    chats = asyncio.run(_run_engine(Path(db), folder, names))
    Path(out).write_text(json.dumps(chats))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
