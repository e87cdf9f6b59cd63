"""Safe mode of direct model chats: each ``run_command`` asks ``RunRequest.on_permission`` first.

Headless callbacks answer as a user would; the scripted OpenAI-compatible server records what the
model receives, and real files show whether a command ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")

from fakes.fake_openai_server import FakeOpenAIServer, text_reply, tool_reply
from helpers import Collector, assert_run_gone, async_test, wait_until

from tolaria.core.adapters.manifest import Manifest, parse_manifest
from tolaria.core.events import Diagnostic, Done, ToolDone
from tolaria.core.modelchat.client import CANCELLED_TOOL_RESULT
from tolaria.core.modelchat.command_approval import DECLINED, NO_ONE_TO_ASK
from tolaria.core.permissions import PermissionCallback, PermissionRequest
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

SECRET = "sk-safe-mode-0123456789"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    yield srv
    srv.stop()


def manifest(server: FakeOpenAIServer, permissions: str = "safe", **extra: Any) -> Manifest:
    return Manifest(id="fake-chat", name="Fake chat", protocol="openai-chat", command=(),
                    base_url=server.base_url, model="fake-model", permissions=permissions,
                    **extra)


def answering(*answers: str | None) -> tuple[PermissionCallback, list[PermissionRequest]]:
    asked: list[PermissionRequest] = []
    queue = list(answers)

    async def answer(request: PermissionRequest) -> str | None:
        asked.append(request)
        return queue.pop(0)

    return answer, asked


async def run(server: FakeOpenAIServer, cwd: Path, hook: PermissionCallback | None,
              permissions: str = "safe", env: dict[str, str] | None = None,
              **extra: Any) -> tuple[Done, Collector]:
    collector, sid = Collector(), new_stream_id()
    request = RunRequest(manifest(server, permissions, **extra), "go", str(cwd), env or {},
                         on_permission=hook)
    done = await stream_ai_agent(request, sid, collector, registry=ProcessRegistry(),
                                 grace_s=0.3)
    assert_run_gone(sid)
    return done, collector


def tool_messages(server: FakeOpenAIServer, n: int = 1) -> list[dict[str, Any]]:
    return [m for m in server.requests[n].body["messages"] if m["role"] == "tool"]


def notes(collector: Collector) -> list[str]:
    return [e.message for e in collector.events
            if isinstance(e, Diagnostic) and e.source == "permission"]


@async_test
async def test_reject_tells_the_model_and_runs_nothing(server: FakeOpenAIServer,
                                                      tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": "touch ran"})),
                  text_reply("ok, I won't"))
    hook, asked = answering("reject_once")
    done, collector = await run(server, tmp_path, hook)
    assert done.stop_reason == "end_turn"
    assert not (tmp_path / "ran").exists()
    assert tool_messages(server) == [{"role": "tool", "tool_call_id": "c1", "content": DECLINED}]
    assert DECLINED == "The user declined to run this command."
    [request] = asked
    assert (request.tool_id, request.title, request.input, request.kind) == (
        "c1", "touch ran", {"command": "touch ran"}, "execute")
    assert [c.kind for c in request.choices] == ["allow_once", "allow_always", "reject_once"]
    finish = [e for e in collector.events if isinstance(e, ToolDone)]
    assert [(d.tool_id, d.output, d.is_error) for d in finish] == [("c1", DECLINED, True)]
    assert notes(collector) == ["you rejected 'touch ran' (Reject)"]


@async_test
async def test_allow_once_runs_the_command(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": "touch ran; echo made"})),
                  text_reply("done"))
    hook, asked = answering("allow_once")
    done, collector = await run(server, tmp_path, hook)
    assert done.stop_reason == "end_turn"
    assert (tmp_path / "ran").exists()
    assert tool_messages(server)[0]["content"] == "exit code 0\nmade\n"
    assert len(asked) == 1
    assert notes(collector) == ["you allowed 'touch ran; echo made' (Allow once)"]


@async_test
async def test_allow_always_stops_asking_for_the_turn(server: FakeOpenAIServer,
                                                     tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": "touch one"}),
                             ("c2", "run_command", {"command": "touch two"})),
                  tool_reply(("c3", "run_command", {"command": "touch three"})),
                  text_reply("done"))
    hook, asked = answering("allow_always")
    done, _ = await run(server, tmp_path, hook)
    assert done.stop_reason == "end_turn"
    assert all((tmp_path / name).exists() for name in ("one", "two", "three"))
    assert [r.title for r in asked] == ["touch one"]


@async_test
async def test_read_only_tools_are_never_asked(server: FakeOpenAIServer, tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("hello")
    server.script(tool_reply(("c1", "read_file", {"path": "notes.md"}),
                             ("c2", "list_directory", {}),
                             ("c3", "search_text", {"pattern": "hel"})),
                  text_reply("read"))
    hook, asked = answering()
    done, _ = await run(server, tmp_path, hook)
    assert done.stop_reason == "end_turn"
    assert asked == []
    contents = [m["content"] for m in tool_messages(server)]
    assert contents[0] == "hello" and "notes.md" in contents[1] and "notes.md:1" in contents[2]


@async_test
async def test_safe_without_anyone_to_ask_does_not_run(server: FakeOpenAIServer,
                                                      tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": "touch ran"})), text_reply("ok"))
    done, collector = await run(server, tmp_path, None)
    assert done.stop_reason == "end_turn"
    assert not (tmp_path / "ran").exists()
    assert tool_messages(server)[0]["content"] == NO_ONE_TO_ASK
    assert len(notes(collector)) == 1 and "permissions = \"full\"" in notes(collector)[0]


@async_test
async def test_full_mode_never_asks(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": "touch ran"})), text_reply("ok"))
    hook, asked = answering()
    done, collector = await run(server, tmp_path, hook, permissions="full")
    assert done.stop_reason == "end_turn"
    assert (tmp_path / "ran").exists() and asked == [] and notes(collector) == []


@async_test
async def test_stop_while_asking_cancels_the_question(server: FakeOpenAIServer,
                                                     tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": "touch ran"})),
                  text_reply("never asked for"))
    asking = asyncio.Event()
    outcome: list[str] = []

    async def wait_forever(request: PermissionRequest) -> str | None:
        asking.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            outcome.append("cancelled")  # the chat window closes its prompt here
            raise
        return "allow_once"

    collector, sid, registry = Collector(), new_stream_id(), ProcessRegistry()
    request = RunRequest(manifest(server), "go", str(tmp_path), on_permission=wait_forever)
    task = asyncio.ensure_future(stream_ai_agent(request, sid, collector, registry=registry,
                                                 grace_s=0.3))
    await asyncio.wait_for(asking.wait(), 10)
    assert registry.abort(sid)
    done = await asyncio.wait_for(task, 10)
    assert done.stop_reason == "cancelled"
    await wait_until(lambda: outcome == ["cancelled"], 2, "the question to be cancelled")
    assert not (tmp_path / "ran").exists()
    assert len(server.requests) == 1  # nothing more was asked of the model
    finish = [e for e in collector.events if isinstance(e, ToolDone)]
    assert [(d.tool_id, d.output) for d in finish] == [("c1", CANCELLED_TOOL_RESULT)]
    assert_run_gone(sid)


@async_test
async def test_the_api_key_never_reaches_the_question(server: FakeOpenAIServer,
                                                     tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": f"echo {SECRET}"})),
                  text_reply("ok"))
    hook, asked = answering("reject_once")
    done, collector = await run(server, tmp_path, hook, env={"SAFE_KEY": SECRET},
                                api_key_env="SAFE_KEY")
    assert done.stop_reason == "end_turn"
    assert asked[0].title == "echo ***" and asked[0].input == {"command": "echo ***"}
    assert all(SECRET not in n for n in notes(collector))


def test_permissions_key_is_accepted_for_model_chats() -> None:
    base = {"id": "m", "protocol": "openai-chat", "base_url": "http://127.0.0.1:1/v1",
            "model": "x"}
    assert parse_manifest(base).permissions == "safe"
    assert parse_manifest({**base, "permissions": "full"}).permissions == "full"
