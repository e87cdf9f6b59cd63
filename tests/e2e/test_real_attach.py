"""Attachments reach each real CLI in its own form (ADR 0028): an image from a folder outside
the working folder (a user's Downloads) is attached, the turn runs against the loopback fake
model, and the model request must carry the image's bytes (Qwen re-encodes images as JPEG: a JPEG
must arrive). A text file's content must arrive too."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from attachfiles import write_png
from e2e.clis import run_env
from e2e.e2ehelpers import TURN_S, installed_cli, manifest
from e2e.fake_model import FakeModelServer, images_in
from helpers import Collector, async_test, marker_pids

from tolaria.chats.attachments import AttachmentDesk
from tolaria.core.events import Attached, Done, Error
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

#: What each CLI is told so that it believes its model can see (Qwen decides by the model's
#: name; opencode by its config).
_VISION_MODEL = "qwen-vl-max"


#: ACP adapters -> the pinned CLI that provides each.
_ACP_CLIS = {"claude-acp": "claude-acp", "gemini-acp": "gemini", "qwen-acp": "qwen",
             "opencode-acp": "opencode"}


def _vision_env(agent: str, env: dict[str, str], home: Path) -> dict[str, str]:
    if agent == "qwen":
        env["OPENAI_MODEL"] = _VISION_MODEL
    if agent == "opencode":
        conf = home / ".config" / "opencode" / "opencode.json"
        data = json.loads(conf.read_text())
        data["provider"]["fake"]["models"]["fake-model"].update(
            attachment=True, modalities={"input": ["text", "image"], "output": ["text"]})
        conf.write_text(json.dumps(data))
    return env


async def _run(agent: str, server: FakeModelServer, tmp: Path, files: list[Path],
               prompt: str = "E2E-TEXT: what is in the attachment?"
               ) -> tuple[Done, Collector, list[dict[str, object]]]:
    cli = installed_cli(_ACP_CLIS.get(agent, agent))
    if agent == "claude-acp":
        installed_cli("claude")
    env = _vision_env(agent.removesuffix("-acp"), run_env(cli, tmp / "home", server.url),
                      tmp / "home")
    cwd = tmp / "work"
    cwd.mkdir()
    desk = AttachmentDesk(None)
    attached = tuple(desk.attach(str(f)) for f in files)
    request = RunRequest(manifest(agent), prompt, str(cwd), env, permission_mode="full",
                         attachments=attached)
    events = Collector()
    stream_id = new_stream_id()
    before = len(server.seen)
    done = await asyncio.wait_for(stream_ai_agent(request, stream_id, events,
                                                  registry=ProcessRegistry()), TURN_S)
    assert not marker_pids(stream_id)
    staged = desk.blobs.root / "staged"
    assert not staged.exists() or not any(staged.iterdir()), "the staged copies outlived the run"
    return done, events, [s.body for s in server.seen[before:]]


def _explain(events: Collector) -> str:
    return "\n".join(repr(e)[:300] for e in events.events[-20:])


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini", "qwen", "opencode"])
@async_test
async def test_an_image_from_outside_the_folder_reaches_the_model(
        agent: str, model_server: FakeModelServer, tmp_path: Path) -> None:
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    data = write_png(downloads / "screen shot.png", width=16, height=12)
    done, events, bodies = await _run(agent, model_server, tmp_path,
                                      [downloads / "screen shot.png"])
    assert done.stop_reason == "end_turn", _explain(events)
    said = [e for e in events.events if isinstance(e, Attached)]
    assert [e.name for e in said] == ["screen shot.png"], _explain(events)
    images = [img for body in bodies for img in images_in(body)]
    if agent == "qwen":  # re-encoded by Qwen Code itself
        assert any(img.startswith(b"\xff\xd8\xff") for img in images), bodies
    else:
        assert data in images, f"{agent}: the image's bytes did not reach the model"


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini", "qwen", "opencode"])
@async_test
async def test_a_text_file_reaches_the_model(agent: str, model_server: FakeModelServer,
                                             tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("TOLARIA-ATTACHED-CONTENT-7361\n")
    done, events, bodies = await _run(agent, model_server, tmp_path, [notes])
    assert done.stop_reason == "end_turn", _explain(events)
    sent = json.dumps(bodies)
    if agent == "codex":  # a path to the private copy, for its read tool
        assert "notes.txt" in sent and "private copies" in sent, sent[:2000]
    else:
        assert "TOLARIA-ATTACHED-CONTENT-7361" in sent, f"{agent}: {sent[:2000]}"


def test_tolaria_run_attach_with_real_claude(model_server: FakeModelServer,
                                             tmp_path: Path) -> None:
    """``tolaria run --attach`` (the command line, a real process) with the real Claude Code:
    the image's bytes reach the model, and ``--json`` says how it went."""
    import subprocess
    import sys

    from helpers import cli_env

    cli = installed_cli("claude")
    env = {**cli_env(tmp_path / "tolaria-home"),
           **run_env(cli, tmp_path / "home", model_server.url)}
    work = tmp_path / "work"
    work.mkdir()
    data = write_png(tmp_path / "bug.png", width=20, height=10)
    before = len(model_server.seen)
    done = subprocess.run([sys.executable, "-m", "tolaria", "run", "--json", "--agent", "claude",
                           "--attach", str(tmp_path / "bug.png"), "E2E-TEXT: what is this?"],
                          env=env, cwd=work, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    (said,) = [e for e in events if e["kind"] == "attached"]
    assert said["form"] == "claude-blocks" and said["how"] == "as an image block"
    images = [img for s in model_server.seen[before:] for img in images_in(s.body)]
    assert data in images


@pytest.mark.parametrize("agent", sorted(_ACP_CLIS))
@async_test
async def test_an_image_reaches_the_model_through_a_real_acp_agent(
        agent: str, model_server: FakeModelServer, tmp_path: Path) -> None:
    """ACP agents get an ``image`` block when their ``promptCapabilities`` say ``image``; one
    that does not is refused with one line naming it and the file, before the prompt."""
    data = write_png(tmp_path / "shot.png", width=12, height=12)
    done, events, bodies = await _run(agent, model_server, tmp_path, [tmp_path / "shot.png"])
    errors = [e.message for e in events.events if isinstance(e, Error)]
    if agent == "qwen-acp":  # its manifest refuses images: Qwen's ACP mode drops them
        assert done.stop_reason == "error" and errors == [
            "Qwen Code (ACP) cannot take images: shot.png was not sent (pick an agent that can "
            "see images, or remove it)"], _explain(events)
        assert bodies == []  # never started
        return
    if done.stop_reason == "error" and errors and "cannot take images" in errors[0]:
        assert bodies == [] or not any(images_in(b) for b in bodies), errors
        assert "shot.png was not sent" in errors[0]
        print(f"{agent}: refused by its promptCapabilities")
        return
    assert done.stop_reason == "end_turn", _explain(events)
    images = [img for body in bodies for img in images_in(body)]
    assert data in images, f"{agent}: the image's bytes did not reach the model"
    print(f"{agent}: the image's bytes reached the model")
