"""Queued messages carry their attachments (issue 26): a message with an image typed while a
turn runs is queued with it, kept by the store across a restart, and reaches the agent in its
own form (here ``--image FILE``, a real fake agent that hashes what it got) when the turn ends."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path

import pytest
from attachfiles import write_png
from chats.test_engine_attachments import Seen as AttachSeen
from helpers import async_test, wait_until

from tolaria.chats.attachments import AttachmentDesk
from tolaria.chats.engine import TurnEngine
from tolaria.core.adapters.manifest import AdapterSet, load_adapters, parse_manifest
from tolaria.core.events import TextDelta
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import Store
from tolaria.support.tasks import TaskSet

AGENT = Path(__file__).resolve().parents[1] / "fakes" / "image_agent.py"


class Seen(AttachSeen):
    def text(self, stream_id: str) -> str:
        return "".join(e.text for e in self.events
                       if isinstance(e, TextDelta) and e.stream_id == stream_id)


def adapters() -> AdapterSet:
    imager = parse_manifest({
        "id": "imager", "name": "Imager", "protocol": "lines",
        "command": [sys.executable, str(AGENT), "--", "{prompt}"],
        "attachments": {"images": "args", "image_args": ["--image", "{file}"]}})
    builtin = load_adapters()
    return AdapterSet({**builtin.manifests, "imager": imager}, [])


@async_test
async def test_a_queued_image_reaches_the_agent_in_its_form(tmp_path: Path) -> None:
    store = Store(tmp_path / "tolaria.sqlite3")
    seen = Seen()
    engine = TurnEngine(store, ProcessRegistry(), seen, TaskSet(), adapters=adapters(),
                        grace_s=1.0)
    work = tmp_path / "work"
    work.mkdir()
    try:
        chat = engine.new_conversation("imager", str(work)).id
        first = engine.send(chat, "WAIT for me")
        assert first is not None
        data = write_png(tmp_path / "bug.png", width=9, height=7)
        shot = AttachmentDesk(store).attach(str(tmp_path / "bug.png"), chat)
        queued = engine.queue(chat, "look at this", [shot])
        assert queued is not None and queued.attachments == (shot,)
        # Stored with it: a restart (a new store on the same file) reads it back.
        again = Store(tmp_path / "tolaria.sqlite3")
        try:
            assert [m.attachments for m in again.queued(chat)] == [(shot,)]
        finally:
            again.close()
        assert shot.sha256 in store.referenced_attachments()
        (work / "release").write_text("")
        await wait_until(lambda: len(store.turns(chat)) == 2
                         and engine.running_stream(chat) is None, within=30,
                         what="the queued message delivered and answered")
        await engine.tasks.wait()
        second = store.turns(chat)[1]
        assert second.prompt == "look at this"
        assert [a.sha256 for a in store.attachments(second.id)] == [shot.sha256]
        said = seen.text(second.stream_id)
        assert f"image 1-bug.png {hashlib.sha256(data).hexdigest()}" in said, said
        assert store.queued(chat) == []
        # A chat deleted with a message still queued: its file's copy goes with it.
        assert engine.send(chat, "WAIT again") is not None
        (work / "release").unlink()
        write_png(tmp_path / "other.png", width=3, height=3)
        other = AttachmentDesk(store).attach(str(tmp_path / "other.png"), chat)
        assert engine.queue(chat, "never sent", [other]) is not None
        engine.delete(chat)
        (work / "release").write_text("")
        await wait_until(lambda: store.get_conversation(chat) is None, within=20,
                         what="the deletion")
        assert not AttachmentDesk(store).blobs.has(other.sha256)
    finally:
        await engine.shutdown()
        await asyncio.sleep(0)
        store.close()


@async_test
async def test_an_image_is_refused_at_queue_time_for_an_agent_without_images(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_DELAY", "0.5")
    store = Store(tmp_path / "tolaria.sqlite3")
    seen = Seen()
    engine = TurnEngine(store, ProcessRegistry(), seen, TaskSet(), adapters=load_adapters(),
                        grace_s=1.0)
    try:
        chat = engine.new_conversation("demo", str(tmp_path)).id
        assert engine.send(chat, "a long one") is not None
        write_png(tmp_path / "shot.png")
        shot = AttachmentDesk(store).attach(str(tmp_path / "shot.png"), chat)
        assert engine.queue(chat, "and this", [shot]) is None
        assert seen.problems == ["Demo agent (offline) cannot take images: shot.png was not "
                                 "sent (pick an agent that can see images, or remove it)"]
        assert store.queued(chat) == []
        engine.stop(chat)
        await wait_until(lambda: engine.running_stream(chat) is None, within=20, what="stop")
        await engine.tasks.wait()
    finally:
        await engine.shutdown()
        await asyncio.sleep(0)
        store.close()
