"""ACP attachments as the agent's ``promptCapabilities`` allow (ADR 0028), against the fake ACP
agent (a real process): an agent advertising images gets the image's bytes in an ``image`` block
and a text file as an embedded ``resource``; one that does not is refused with one line naming
it and the file, and gets no ``session/prompt``; without ``embeddedContext`` a text file goes as
a ``resource_link`` to its private copy."""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from attachfiles import write_png
from helpers import Collector, assert_run_gone, async_test

from tolaria.chats.attachments import AttachmentDesk
from tolaria.core.adapters.manifest import parse_manifest
from tolaria.core.events import Attached, Error
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

FAKE_ACP = Path(__file__).resolve().parents[3] / "fakes" / "fake_acp_agent.py"


async def _turn(tmp: Path, caps: dict[str, bool]) -> tuple[str, Collector, list[Any]]:
    log = tmp / "log"
    log.mkdir()
    manifest = parse_manifest({"id": "fake-acp", "name": "Fake ACP", "protocol": "acp",
                               "command": [sys.executable, str(FAKE_ACP), "normal"],
                               "env": {"FAKE_LOG": str(log),
                                       "FAKE_ACP_PROMPT_CAPS": json.dumps(caps)}})
    data = write_png(tmp / "shot.png")
    (tmp / "notes.txt").write_text("NOTES-CONTENT-42")
    desk = AttachmentDesk(None)
    files = (desk.attach(str(tmp / "shot.png")), desk.attach(str(tmp / "notes.txt")))
    if not caps.get("image"):
        files = files[::-1]  # the text first: nothing of the turn may go before the refusal
    request = dataclasses.replace(RunRequest(manifest, "look", str(tmp)), attachments=files)
    collector = Collector()
    sid = new_stream_id()
    done = await stream_ai_agent(request, sid, collector, registry=ProcessRegistry(), grace_s=0.5)
    assert_run_gone(sid)
    prompts = [json.loads(line) for line in (log / "acp.jsonl").read_text().splitlines()]
    sent = [p["prompt"] for p in prompts if p["method"] == "session/prompt"]
    assert base64.b64encode(data).decode() in json.dumps(sent) or not caps.get("image")
    return done.stop_reason, collector, sent


@async_test
async def test_an_agent_that_takes_images_gets_the_bytes(tmp_path: Path) -> None:
    reason, collector, sent = await _turn(tmp_path, {"image": True, "embeddedContext": True})
    assert reason == "end_turn"
    (blocks,) = sent
    assert [b["type"] for b in blocks] == ["text", "image", "resource"]
    assert blocks[1]["mimeType"] == "image/png"
    assert blocks[2]["resource"]["text"] == "NOTES-CONTENT-42"
    assert [e.form for e in collector.events if isinstance(e, Attached)] == ["acp", "acp"]


@async_test
async def test_without_embedded_context_a_text_file_goes_as_a_link(tmp_path: Path) -> None:
    reason, _collector, sent = await _turn(tmp_path, {"image": True})
    assert reason == "end_turn"
    link = sent[0][2]
    assert link["type"] == "resource_link" and link["name"] == "notes.txt"
    assert Path(link["uri"].removeprefix("file://")).name == "2-notes.txt"


@async_test
async def test_an_agent_without_image_support_is_refused_before_the_prompt(
        tmp_path: Path) -> None:
    reason, collector, sent = await _turn(tmp_path, {"image": False})
    assert reason == "error" and sent == []
    errors = [e.message for e in collector.events if isinstance(e, Error)]
    assert errors == ["Fake ACP cannot take images (its ACP promptCapabilities say so): "
                      "shot.png was not sent"]


@async_test
async def test_a_mentioned_file_goes_as_a_resource_link_beside_its_path(tmp_path: Path) -> None:
    # The composer's ``@path`` (issue 26 item 3): an ACP agent gets the path in the text and a
    # resource_link to the file; a folder or a name that is no file stays text only.
    from tolaria.chats.run_config import prepare_run
    from tolaria.config.settings import Settings

    log = tmp_path / "log"
    log.mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")
    manifest = parse_manifest({"id": "fake-acp", "name": "Fake ACP", "protocol": "acp",
                               "command": [sys.executable, str(FAKE_ACP), "normal"],
                               "env": {"FAKE_LOG": str(log), "FAKE_ACP_PROMPT_CAPS": "{}"}})
    options = prepare_run(manifest, settings=Settings(), overrides={},
                          path=tmp_path / "settings.toml")
    request = options.request("fix @src/app.py and @src/ but not @nobody", cwd=str(tmp_path))
    sid = new_stream_id()
    done = await stream_ai_agent(request, sid, Collector(), registry=ProcessRegistry(),
                                 grace_s=0.5)
    assert_run_gone(sid)
    assert done.stop_reason == "end_turn"
    prompts = [json.loads(line) for line in (log / "acp.jsonl").read_text().splitlines()]
    (blocks,) = [p["prompt"] for p in prompts if p["method"] == "session/prompt"]
    assert blocks[0] == {"type": "text", "text": "fix src/app.py and src/ but not @nobody"}
    assert blocks[1:] == [{"type": "resource_link", "name": "app.py",
                           "uri": (tmp_path / "src" / "app.py").as_uri()}]
