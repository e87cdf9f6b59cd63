"""Which queued message the chat's agent cannot take now (chats/engine/queue_hold.py) and taking
the files off one (``Store.queue_drop_files``): real store, real manifests."""

from __future__ import annotations

import dataclasses

from tolaria.chats.engine.queue_hold import first_held
from tolaria.core.adapters.attach_spec import AT_PATH, AttachSpec
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.attachments.model import IMAGE, TEXT, Attachment
from tolaria.core.store.db import Store

PNG = Attachment("shot.png", "a" * 64, 10, "image/png", IMAGE)
TXT = Attachment("notes.txt", "b" * 64, 5, "text/plain", TEXT)
BLIND = Manifest(id="blind", name="Codex", protocol="claude-stream-json", command=("x",))
SEEING = dataclasses.replace(BLIND, id="seeing", name="Seeing",
                             attachments=AttachSpec(images=AT_PATH))


def test_the_first_message_the_agent_cannot_take_is_held(store: Store) -> None:
    chat = store.create_conversation("c", "blind", None)
    for text, files in (("plain", ()), ("with a file", (TXT,)), ("look", (PNG, TXT)),
                        ("after", ())):
        store.queue_add(chat.id, text, files)
    queued = store.queued(chat.id)
    assert first_held(chat, BLIND, queued) == (
        2, "Codex here takes no images: remove the image or switch back")
    assert first_held(chat, SEEING, queued) is None
    on_host = dataclasses.replace(chat, host="devbox")
    index, why = first_held(on_host, SEEING, queued) or (0, "")
    assert index == 1 and why.startswith("The agent on devbox cannot read this machine's files")


def test_dropping_the_images_keeps_the_text_the_place_and_other_files(store: Store) -> None:
    chat = store.create_conversation("c", "blind", None)
    first = store.queue_add(chat.id, "look", (PNG, TXT))
    store.queue_add(chat.id, "after")
    assert first is not None
    dropped = store.queue_drop_files(chat.id, first.id)
    assert dropped is not None and dropped.text == "look" and dropped.attachments == (TXT,)
    assert [m.text for m in store.queued(chat.id)] == ["look", "after"]
    assert first_held(chat, BLIND, store.queued(chat.id)) is None
    all_gone = store.queue_drop_files(chat.id, first.id, images_only=False)
    assert all_gone is not None and all_gone.attachments == ()
    assert store.queue_drop_files(chat.id, 12345) is None
