"""Images inside imported CLI sessions (issue 26 item 2): real session files the real CLIs wrote
with an image attached (tests/fixtures/sessions_image, captured by tests/e2e/capture_sessions.py
--image) become the imported turn's attachments, stored content-addressed under the same caps,
shown by an ``attached`` event; one over a cap is a placeholder that says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from attachfiles import png_bytes

from tolaria.chats.importers import IMPORTERS
from tolaria.chats.importing import import_sessions
from tolaria.core.attachments.blobs import BlobStore
from tolaria.core.attachments.model import AttachLimits
from tolaria.core.events import Attached
from tolaria.core.store.db import Store

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT / "tests" / "fixtures" / "sessions_image"
AGENTS = ["claude", "codex", "gemini", "qwen", "opencode"]
#: The PNG the capture attached (tests/attachfiles.py, 16 x 12); Qwen Code re-encodes it as JPEG.
PNG = png_bytes(width=16, height=12)


@pytest.mark.parametrize("agent", AGENTS)
def test_each_cli_session_keeps_its_prompts_image(agent: str) -> None:
    importer = IMPORTERS[agent]
    [path] = list(importer.find(SESSIONS / agent))
    [session] = importer.read(path)
    [turn] = session.turns
    [image] = turn.images
    assert image.problem is None and image.data is not None
    if agent == "qwen":
        assert image.data.startswith(b"\xff\xd8\xff")
    else:
        assert image.data == PNG
    assert "E2E-TEXT: what is in the attachment?" in turn.prompt
    # The CLI's own wrapping of the image and the files an @path read in are not the prompt.
    assert "<image" not in turn.prompt and "Content from" not in turn.prompt
    assert "Image overview" not in turn.prompt


@pytest.mark.parametrize("agent", AGENTS)
def test_an_imported_turn_stores_its_image_and_shows_its_card(agent: str,
                                                              tmp_path: Path) -> None:
    home = tmp_path / "cli-home"
    shutil.copytree(SESSIONS / agent, home)
    blobs = BlobStore(tmp_path / "blobs")
    store = Store(tmp_path / "t.sqlite3")
    try:
        report = import_sessions(store, home, [agent], limits=AttachLimits(), blobs=blobs)
        assert [i.turns_added for i in report.imported] == [1]
        [turn] = store.turns(report.imported[0].conversation_id)
        [attachment] = store.attachments(turn.id)
        stored = blobs.path(attachment.sha256).read_bytes()
        assert attachment.kind == "image" and attachment.size == len(stored)
        assert stored == PNG or (agent == "qwen" and stored.startswith(b"\xff\xd8\xff"))
        said = [e for e in store.events(turn.id) if isinstance(e, Attached)]
        assert [(e.name, e.sha256, e.form) for e in said] == [
            (attachment.name, attachment.sha256, "imported")]
        assert said[0].how == f"in the {IMPORTERS[agent].label} session"
        # Imported again: nothing new, the image stored once.
        again = import_sessions(store, home, [agent], limits=AttachLimits(), blobs=blobs)
        assert again.unchanged == 1 and not again.imported
        assert store.referenced_attachments() == {attachment.sha256}
    finally:
        store.close()


def test_an_image_over_the_cap_is_a_placeholder_that_says_so(tmp_path: Path) -> None:
    home = tmp_path / "cli-home"
    shutil.copytree(SESSIONS / "claude", home)
    blobs = BlobStore(tmp_path / "blobs")
    store = Store(tmp_path / "t.sqlite3")
    try:
        report = import_sessions(store, home, ["claude"], limits=AttachLimits(max_file=50),
                                 blobs=blobs)
        [turn] = store.turns(report.imported[0].conversation_id)
        assert store.attachments(turn.id) == []
        [said] = [e for e in store.events(turn.id) if isinstance(e, Attached)]
        assert said.sha256 == "" and said.size == len(PNG)
        assert said.note == (f"not imported: image-1.png is {len(PNG)} bytes; the limit is "
                             "50 bytes per file (settings.toml [attachments])")
        assert not blobs.root.exists() or not any(blobs.root.rglob("*"))
    finally:
        store.close()


def test_the_per_chat_cap_counts_the_images_of_one_import(tmp_path: Path) -> None:
    """Two different images in one prompt, a per-chat cap that holds only one: the second is a
    placeholder naming the chat's cap."""
    import base64
    import json

    other = png_bytes(width=16, height=12, rgb=(1, 2, 3))
    source = next((SESSIONS / "claude").rglob("*.jsonl"))
    lines = []
    for line in source.read_text().splitlines():
        record = json.loads(line)
        content = record.get("message", {}).get("content") if record.get("type") == "user" \
            else None
        if isinstance(content, list) and not record.get("isMeta") and any(
                isinstance(p, dict) and p.get("type") == "image" for p in content):
            content.append({"type": "image", "source": {
                "type": "base64", "media_type": "image/png",
                "data": base64.b64encode(other).decode()}})
        lines.append(json.dumps(record))
    home = tmp_path / "cli-home"
    target = home / source.relative_to(SESSIONS / "claude")
    target.parent.mkdir(parents=True)
    target.write_text("\n".join(lines) + "\n")
    store = Store(tmp_path / "t.sqlite3")
    try:
        limits = AttachLimits(max_chat=len(PNG) + 10)
        report = import_sessions(store, home, ["claude"], limits=limits,
                                 blobs=BlobStore(tmp_path / "blobs"))
        [turn] = store.turns(report.imported[0].conversation_id)
        assert [a.name for a in store.attachments(turn.id)] == ["image-1.png"]
        notes = [e.note for e in store.events(turn.id) if isinstance(e, Attached)]
        assert notes[0] == "" and notes[1].startswith("not imported: image-2.png")
        assert "would take this chat over" in notes[1]
    finally:
        store.close()
