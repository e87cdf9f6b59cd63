"""The turn engine with attachments (ADR 0028): stored with the turn, said with an ``attached``
event, kept by Retry (and so by Edit-and-resend, which is a Retry with new text), an image the
agent cannot take refused before anything is recorded, the copies deleted with the chat."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from attachfiles import write_png
from helpers import async_test, wait_until

from tolaria.chats.attachments import AttachmentDesk
from tolaria.chats.engine import QuietObserver, TurnEngine
from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.events import Attached, Event
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import Store
from tolaria.support.tasks import TaskSet


class Seen(QuietObserver):
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.problems: list[str] = []

    def event(self, event: Event) -> None:
        self.events.append(event)

    def problem_reported(self, message: str) -> None:
        self.problems.append(message)


@async_test
async def test_attachments_go_with_the_turn_retry_and_the_chat(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    monkeypatch.setenv("TOLARIA_DEMO_DELAY", "0")
    store = Store(tmp_path / "tolaria.sqlite3")
    seen = Seen()
    engine = TurnEngine(store, ProcessRegistry(), seen, TaskSet(), adapters=load_adapters(),
                        grace_s=1.0)
    desk = AttachmentDesk(store)
    try:
        chat = engine.new_conversation("demo", str(tmp_path)).id
        (tmp_path / "notes.txt").write_text("n")
        notes = desk.attach(str(tmp_path / "notes.txt"), chat)
        write_png(tmp_path / "shot.png")
        shot = desk.attach(str(tmp_path / "shot.png"), chat)
        # The demo agent takes no images: refused, nothing recorded, the reason said.
        assert engine.send(chat, "look", attachments=[notes, shot]) is None
        assert seen.problems == ["Demo agent (offline) cannot take images: shot.png was not "
                                 "sent (pick an agent that can see images, or remove it)"]
        assert store.turns(chat) == []
        first = engine.send(chat, "read it", attachments=[notes])
        assert first is not None
        await wait_until(lambda: engine.running_stream(chat) is None, within=20, what="the end")
        retried = engine.retry(chat, first, "read it again")  # Edit-and-resend
        assert retried is not None
        await wait_until(lambda: engine.running_stream(chat) is None, within=20, what="the end")
        await engine.tasks.wait()
        turns = store.turns(chat)
        assert [[a.name for a in store.attachments(t.id)] for t in turns] == [
            ["notes.txt"], ["notes.txt"]]
        said = [e for e in seen.events if isinstance(e, Attached)]
        assert [(e.stream_id, e.form) for e in said] == [(first, "path"), (retried, "path")]
        engine.delete(chat)
        await wait_until(lambda: store.get_conversation(chat) is None, within=10,
                         what="the deletion")
        assert not desk.blobs.has(notes.sha256)
    finally:
        await engine.shutdown()
        await asyncio.sleep(0)
        store.close()


@async_test
async def test_attachments_are_refused_for_a_chat_on_another_host(tmp_path: Path) -> None:
    """The agent on a host cannot read this machine's stored copies: refused before anything
    is recorded or started, the reason said (as ``tolaria run --host --attach`` is)."""
    store = Store(tmp_path / "tolaria.sqlite3")
    seen = Seen()
    engine = TurnEngine(store, ProcessRegistry(), seen, TaskSet(), adapters=load_adapters(),
                        grace_s=1.0)
    try:
        chat = engine.new_conversation("demo", None, host="devbox").id
        (tmp_path / "notes.txt").write_text("n")
        notes = AttachmentDesk(store).attach(str(tmp_path / "notes.txt"), chat)
        assert engine.send(chat, "read it", attachments=[notes]) is None
        assert seen.problems == ["Attachments do not work on another host yet: the agent on "
                                 "devbox cannot read this machine's files."]
        assert store.turns(chat) == []
    finally:
        await engine.shutdown()
        store.close()
