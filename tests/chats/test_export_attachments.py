"""A chat's attachments in its export (ADR 0028): JSON with the bytes, HTML with the image inline
(a data: URL, nothing fetched) and the others as named chips, Markdown naming each file."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

from attachfiles import write_png

from tolaria.chats.attachments import AttachmentDesk
from tolaria.chats.export import export_chat
from tolaria.core.events import Done, TextDelta
from tolaria.core.store.db import Store


def _export(store: Store, chat: int, fmt: str) -> str:
    out = io.StringIO()
    export_chat(store, chat, fmt, out)
    return out.getvalue()


def test_every_format_carries_the_attachments(store: Store, tmp_path: Path) -> None:
    desk = AttachmentDesk(store)
    data = write_png(tmp_path / "bug.png")
    (tmp_path / "log.txt").write_text("trace\n")
    chat = store.create_conversation("c", "claude", str(tmp_path))
    files = [desk.attach(str(tmp_path / "bug.png"), chat.id),
             desk.attach(str(tmp_path / "log.txt"), chat.id)]
    sid = "ai-agent-stream-exportatt"
    store.start_turn(chat.id, sid, "claude", "what broke?", attachments=files)
    store.append_event(TextDelta(sid, text="the parser"))
    store.append_event(Done(sid, stop_reason="end_turn"))
    doc = json.loads(_export(store, chat.id, "json"))
    (turn,) = doc["turns"]
    assert [a["name"] for a in turn["attachments"]] == ["bug.png", "log.txt"]
    assert base64.b64decode(turn["attachments"][0]["data"]) == data
    assert turn["attachments"][0]["media_type"] == "image/png"
    page = _export(store, chat.id, "html")
    assert f'src="data:image/png;base64,{base64.b64encode(data).decode()}"' in page
    assert "📎 log.txt · 6 bytes" in page
    markdown = _export(store, chat.id, "md")
    assert "- 📎 bug.png (" in markdown and "- 📎 log.txt (6 bytes, text/plain)" in markdown
