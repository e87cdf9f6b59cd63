"""Model-chat histories that survive a restart, the retry without tools, the per-run model and
the max_iterations notice, against the loopback fake OpenAI server.

"Restart" is real: the third turn runs in a fresh Python process that only shares the data dir
(TOLARIA_HOME) with the test, and talks to the same fake server.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.fake_openai_server import (
    FakeOpenAIServer,
    Reply,
    text_reply,
    tool_reply,
    tools_unsupported_reply,
)
from helpers import Collector, LiveRun, assert_history_valid, async_test, wait_until

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import Diagnostic, Init
from tolaria.core.modelchat.client import CANCELLED_TOOL_RESULT, NOTICE, ChatHelper, rejects_tools
from tolaria.core.modelchat.history import (
    TRUNCATED_NOTE,
    ChatHistoryStore,
    SavedChat,
    bound_messages,
    history_dir,
)
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    yield srv
    srv.stop()


def manifest(server: FakeOpenAIServer) -> Manifest:
    return Manifest(id="fake-chat", name="Fake chat", protocol="openai-chat", command=(),
                    base_url=server.base_url, model="fake-model", permissions="full")


def run_turn(server: FakeOpenAIServer, prompt: str, cwd: Path, session_id: str | None = None,
             model: str | None = None) -> LiveRun:
    """One turn with brand-new objects (registry, collector): nothing shared in memory."""
    registry, sid, collector = ProcessRegistry(), new_stream_id(), Collector()
    request = RunRequest(manifest(server), prompt, str(cwd), {}, session_id, model=model)
    task = asyncio.ensure_future(stream_ai_agent(request, sid, collector, registry=registry,
                                                 grace_s=0.3))
    return LiveRun(sid, registry, collector, task)


def session_of(run: LiveRun) -> str:
    inits = [e for e in run.collector.events if isinstance(e, Init)]
    assert len(inits) == 1 and inits[0].session_id
    return inits[0].session_id


def notices(run: LiveRun | Collector) -> list[str]:
    events = run.collector.events if isinstance(run, LiveRun) else run.events
    return [e.message for e in events if isinstance(e, Diagnostic) and e.source == NOTICE]




THIRD_TURN = textwrap.dedent("""
    import asyncio, json, sys
    from tolaria.core.adapters.manifest import Manifest
    from tolaria.core.events import to_dict
    from tolaria.core.process.registry import ProcessRegistry
    from tolaria.core.turns.runner import RunRequest, stream_ai_agent
    from tolaria.core.stream_id import new_stream_id

    base_url, session, cwd = sys.argv[1:4]
    manifest = Manifest(id="fake-chat", name="Fake chat", protocol="openai-chat", command=(),
                        base_url=base_url, model="fake-model", permissions="full")
    events = []
    request = RunRequest(manifest, "third", cwd, {}, session)
    asyncio.run(stream_ai_agent(request, new_stream_id(), events.append,
                                registry=ProcessRegistry()))
    print(json.dumps([to_dict(e) for e in events]))
""")


# --- history across a restart -----------------------------------------------------------------


@async_test
async def test_history_survives_a_restart(server: FakeOpenAIServer, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    server.script(tool_reply(("c1", "read_file", {"path": "a.txt"})), text_reply("It says alpha"))
    first = run_turn(server, "read a.txt", tmp_path)
    assert (await first.finish()).stop_reason == "end_turn"
    session = session_of(first)

    # Second turn: cancelled mid-chain, so a tool call is answered "Tool call cancelled".
    server.script(tool_reply(("c2", "run_command", {"command": "sleep 300"}),
                             ("c3", "list_directory", {})))
    second = run_turn(server, "now wait", tmp_path, session)
    await wait_until(lambda: second.collector.of("tool_start"), 10, "the command to start")
    assert second.abort()
    assert (await second.finish()).stop_reason == "cancelled"
    assert session_of(second) == session

    # Third turn in another process: only the data dir is shared.
    server.script(text_reply("I remember"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TOLARIA_STREAM_ID", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", THIRD_TURN, server.base_url, session, str(tmp_path), env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    events = json.loads(out)
    assert events[0]["kind"] == "init" and events[0]["session_id"] == session
    assert events[-1]["kind"] == "done" and events[-1]["stop_reason"] == "end_turn"

    sent = server.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant",
                                         "user", "assistant", "tool", "tool", "user"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["read a.txt", "now wait",
                                                                    "third"]
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "alpha\n"}
    assert [m["content"] for m in sent[7:9]] == [CANCELLED_TOOL_RESULT, CANCELLED_TOOL_RESULT]
    assert_history_valid(sent)
    saved = ChatHistoryStore().load(session)
    assert saved is not None and saved.messages[-1] == {"role": "assistant",
                                                        "content": "I remember"}
    assert not list(history_dir().glob(".*.tmp"))  # atomic writes leave no temporary file


@async_test
async def test_unknown_or_broken_history_starts_a_new_conversation(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    history_dir().mkdir(parents=True)
    (history_dir() / "broken.json").write_text("{not json")
    for wanted, why in (("gone", "it was not found"), ("broken", "is not a saved model chat"),
                        ("../../etc/passwd", "it was not found")):
        server.script(text_reply("fresh"))
        run = run_turn(server, "hi", tmp_path, wanted)
        assert (await run.finish()).stop_reason == "end_turn"
        assert session_of(run) != wanted
        notes = notices(run)  # shown in the turn: the model no longer sees earlier turns
        assert any(why in n and "starting a new one" in n for n in notes), notes
        assert [m["role"] for m in server.requests[-1].body["messages"]] == ["system", "user"]


def test_bound_drops_oldest_turns_whole() -> None:
    system = {"role": "system", "content": "s"}

    def turn(n: int, size: int) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"q{n}"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{n}", "type": "function",
                     "function": {"name": "read_file", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{n}", "content": "x" * size},
                {"role": "assistant", "content": f"a{n}"}]

    messages = [system, *turn(1, 3000), *turn(2, 3000), *turn(3, 3000)]
    assert bound_messages(messages, 100_000) == messages
    cut = bound_messages(messages, 7000)
    assert cut == [system, *turn(2, 3000), *turn(3, 3000)]
    assert_history_valid(cut)
    assert len(json.dumps(cut)) <= 7000
    # The newest turn alone is too big: its tool result is shortened, never dropped.
    small = bound_messages(messages, 2000)
    assert [m["role"] for m in small] == ["system", "user", "assistant", "tool", "assistant"]
    assert small[3]["content"].endswith(TRUNCATED_NOTE)
    assert len(json.dumps(small)) <= 2000
    assert_history_valid(small)


def test_store_caps_sessions_and_is_private(tmp_path: Path) -> None:
    store = ChatHistoryStore(tmp_path / "chats", max_sessions=3)
    for n in range(5):
        store.save(f"s{n}", SavedChat([{"role": "user", "content": f"m{n}"}]))
        os.utime(tmp_path / "chats" / f"s{n}.json", (n + 1, n + 1))
    assert sorted(p.name for p in (tmp_path / "chats").iterdir()) == [
        "s2.json", "s3.json", "s4.json"]
    assert oct((tmp_path / "chats").stat().st_mode & 0o777) == "0o700"
    saved = store.load("s4")
    assert saved is not None and saved.messages == [{"role": "user", "content": "m4"}]


# --- retry without tools ----------------------------------------------------------------------


def test_tool_rejections_are_recognised() -> None:
    assert rejects_tools(400, '{"error":{"message":"registry.ollama.ai/library/gemma3:4b does '
                              'not support tools","type":"api_error"}}')
    assert rejects_tools(500, '{"error":{"message":"tools param requires --jinja flag"}}')
    assert rejects_tools(400, '"auto" tool choice requires --enable-auto-tool-choice and '
                              '--tool-call-parser to be set')
    assert not rejects_tools(400, "model 'nope' not found")
    assert not rejects_tools(401, "does not support tools")


@async_test
async def test_retry_without_tools_and_remember_it(server: FakeOpenAIServer,
                                                   tmp_path: Path) -> None:
    server.script(tools_unsupported_reply(), text_reply("plain answer"))
    first = run_turn(server, "hi", tmp_path)
    assert (await first.finish()).stop_reason == "end_turn"
    assert first.collector.text() == "plain answer"
    assert notices(first) == ["fake-model does not support tools; answering without them"]
    assert not first.collector.of("error")
    assert ["tools" in r.body for r in server.requests] == [True, False]
    assert server.requests[0].body["messages"] == server.requests[1].body["messages"]

    # The next turn of the session (new objects) sends no tools and says nothing more.
    server.script(text_reply("still plain"))
    second = run_turn(server, "again", tmp_path, session_of(first))
    assert (await second.finish()).stop_reason == "end_turn"
    assert "tools" not in server.requests[2].body and notices(second) == []
    # Another model in the same session is asked with tools again.
    server.script(text_reply("I have tools"))
    third = run_turn(server, "other", tmp_path, session_of(first), model="tool-model")
    assert (await third.finish()).stop_reason == "end_turn"
    assert server.requests[3].body["model"] == "tool-model" and "tools" in server.requests[3].body


@async_test
async def test_retry_happens_once_and_other_errors_are_not_retried(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(tools_unsupported_reply(), tools_unsupported_reply())
    events = Collector()
    chat = ChatHelper(server.base_url, "fake-model", cwd=tmp_path, on_event=events)
    assert await chat.prompt("hi") == "error"
    assert len(server.requests) == 2 and notices(events) == [
        "fake-model does not support tools; answering without them"]
    server.script(Reply([], status=400, body={"error": {"message": "model 'x' not found"}}))
    other = ChatHelper(server.base_url, "fake-model", cwd=tmp_path, on_event=events)
    assert await other.prompt("hi") == "error"
    assert len(server.requests) == 3 and other.use_tools and not other.tools_rejected


# --- per-run model, max_iterations notice ------------------------------------------------------


@async_test
async def test_run_request_model_overrides_the_manifest(server: FakeOpenAIServer,
                                                        tmp_path: Path) -> None:
    server.script(text_reply("a"), text_reply("b"))
    run = run_turn(server, "hi", tmp_path, model="qwen3:8b")
    await run.finish()
    plain = run_turn(server, "hi", tmp_path)
    await plain.finish()
    assert [r.body["model"] for r in server.requests] == ["qwen3:8b", "fake-model"]


@async_test
async def test_max_iterations_notice(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(*(tool_reply((f"c{n}", "list_directory", {})) for n in range(3)))
    events = Collector()
    chat = ChatHelper(server.base_url, "fake-model", cwd=tmp_path, on_event=events,
                      max_iterations=2)
    assert await chat.prompt("loop") == "max_iterations"
    assert notices(events) == [
        "Stopped after 2 tool rounds (max_iterations); send a message to continue"]


@async_test
async def test_cancelled_task_leaves_a_valid_saved_history(server: FakeOpenAIServer,
                                                           tmp_path: Path) -> None:
    """The run's task itself is cancelled while a command runs (no Stop, no token): the call
    has no answer in memory, but the saved history answers it."""
    server.script(tool_reply(("c1", "run_command", {"command": "sleep 300"}),
                             ("c2", "list_directory", {})))
    run = run_turn(server, "sleep", tmp_path)
    await wait_until(lambda: run.collector.of("tool_start"), 10, "the command to start")
    session = session_of(run)
    run.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run.task
    saved = ChatHistoryStore().load(session)
    assert saved is not None
    assert [m["role"] for m in saved.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert [m["content"] for m in saved.messages[3:]] == [CANCELLED_TOOL_RESULT] * 2
    assert_history_valid(saved.messages)
