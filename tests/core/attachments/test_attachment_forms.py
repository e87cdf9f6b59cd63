"""Each agent's form of a turn's attachments (the built-in manifests' ``[attachments]``), the
table's own errors, and an image refused before any agent starts."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import pytest
from attachfiles import write_png
from helpers import Collector, async_test, marker_pids

from tolaria.chats.attachments import AttachmentDesk
from tolaria.core.adapters.manifest import ManifestError, build_argv, load_adapters, parse_manifest
from tolaria.core.attachments.forms import deliver, refusal
from tolaria.core.attachments.model import Attachment
from tolaria.core.events import Attached, Done, Error
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent
from tolaria.core.turns.stream_input import user_message


@pytest.fixture
def files(tmp_path: Path) -> tuple[AttachmentDesk, list[Attachment], list[Path], bytes]:
    desk = AttachmentDesk(None)
    data = write_png(tmp_path / "shot.png")
    (tmp_path / "notes.txt").write_text("NOTE")
    (tmp_path / "data.bin").write_bytes(b"\0\1\2")
    attached = [desk.attach(str(tmp_path / n)) for n in ("shot.png", "notes.txt", "data.bin")]
    staged = desk.blobs.stage(attached, "ai-agent-stream-forms")
    return desk, attached, staged, data


def _deliver(agent: str, files: tuple[AttachmentDesk, list[Attachment], list[Path], bytes]
             ) -> tuple[object, list[str]]:
    desk, attached, staged, _data = files
    manifest = load_adapters().get(agent)
    out = deliver(manifest.attachments, "PROMPT", attached, staged, desk.blobs.read)
    argv = build_argv(manifest, prompt=out.prompt, extra=tuple(out.args))
    return out, argv


def test_claude_gets_blocks_on_stdin(files: tuple[AttachmentDesk, list[Attachment],
                                                  list[Path], bytes]) -> None:
    out, _argv = _deliver("claude", files)
    message = json.loads(user_message(out.prompt, out.blocks))  # type: ignore[attr-defined]
    content = message["message"]["content"]
    assert [c["type"] for c in content] == ["text", "image", "text"]
    assert base64.b64decode(content[1]["source"]["data"]) == files[3]
    assert "NOTE" in content[2]["text"]
    assert str(files[2][2]) in content[0]["text"]  # the binary file: a path to its copy


def test_codex_takes_image_flags_before_the_prompt(files: tuple[AttachmentDesk,
                                                                list[Attachment], list[Path],
                                                                bytes]) -> None:
    _out, argv = _deliver("codex", files)
    assert argv[argv.index("--image") + 1] == str(files[2][0])
    assert argv.index("--image") < argv.index("--") < len(argv) - 1
    assert "private copies" in argv[-1] and str(files[2][1]) in argv[-1]


def test_gemini_and_qwen_get_at_paths_and_the_folder_included(
        files: tuple[AttachmentDesk, list[Attachment], list[Path], bytes]) -> None:
    for agent in ("gemini", "qwen"):
        out, argv = _deliver(agent, files)
        assert argv[argv.index("--include-directories") + 1] == str(files[2][0].parent)
        prompt = next(a for a in argv if a.startswith("--prompt="))
        assert all(f"@{p}" in prompt for p in files[2])
    assert out.sent[0][0].name == "shot.png"  # type: ignore[attr-defined]


def test_opencode_takes_file_flags(files: tuple[AttachmentDesk, list[Attachment], list[Path],
                                                bytes]) -> None:
    _out, argv = _deliver("opencode", files)
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--file"] == [
        str(p) for p in files[2]]


def test_openai_chat_gets_image_parts(files: tuple[AttachmentDesk, list[Attachment],
                                                   list[Path], bytes]) -> None:
    out, _argv = _deliver("openai", files)
    url = out.blocks[0]["image_url"]["url"]  # type: ignore[attr-defined]
    assert base64.b64decode(url.split(",", 1)[1]) == files[3]
    assert "NOTE" in out.prompt  # type: ignore[attr-defined]


def test_refusal_names_agent_and_file(files: tuple[AttachmentDesk, list[Attachment],
                                                   list[Path], bytes]) -> None:
    demo = load_adapters().get("demo")
    assert refusal(demo.name, demo.attachments, files[1][1:]) is None  # files: as paths
    assert refusal(demo.name, demo.attachments, files[1]) == (
        "Demo agent (offline) cannot take images: shot.png was not sent (pick an agent that "
        "can see images, or remove it)")


def test_bad_attachments_tables() -> None:
    base = {"id": "x", "protocol": "lines", "command": ["x"]}
    for table, problem in (({"images": "maybe"}, "attachments.images"),
                           ({"images": "args"}, "attachments.image_args"),
                           ({"images": "args", "image_args": ["--i"]}, "exactly once"),
                           ({"sizes": 1}, "unknown key")):
        with pytest.raises(ManifestError, match=problem):
            parse_manifest({**base, "attachments": table})


@async_test
async def test_an_image_for_an_agent_without_images_never_starts_it(tmp_path: Path) -> None:
    write_png(tmp_path / "shot.png")
    attached = (AttachmentDesk(None).attach(str(tmp_path / "shot.png")),)
    request = dataclasses.replace(RunRequest(load_adapters().get("demo"), "hi", str(tmp_path)),
                                  attachments=attached)
    collector, sid, registry = Collector(), new_stream_id(), ProcessRegistry()
    done = await stream_ai_agent(request, sid, collector, registry=registry)
    assert done.stop_reason == "error" and not marker_pids(sid) and registry.live_count() == 0
    assert [type(e) for e in collector.events] == [Error, Done]
    assert not [e for e in collector.events if isinstance(e, Attached)]
