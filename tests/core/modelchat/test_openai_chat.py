"""Direct model chats against a scripted OpenAI-compatible SSE server on 127.0.0.1.

Covers the tool loop, max_iterations, and every cancel path of the seed's design: owned vs
injected tokens, a token shared by two helpers, cancel mid-chain (the remaining tool calls get a
"Tool call cancelled" answer, no further request is sent, the history stays valid), cancel of a
slowly streamed answer (the connection is closed at once, the partial text kept) and Stop of a
running ``run_command`` through the registry (its process is gone when ``done`` arrives).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# httpx must be a dependency in pyproject.toml; until it is, a clean install skips (not fails).
pytest.importorskip("httpx")

from fakes.fake_openai_server import FakeOpenAIServer, Reply, text_reply, tool_reply
from helpers import (
    Collector,
    assert_history_valid,
    assert_run_gone,
    async_test,
    marker_pids,
    start_run,
    wait_until,
)
from redact_cases import ENV, HARMLESS, LEAKS

from tolaria.core.adapters.manifest import Manifest, ManifestError, load_adapters, parse_manifest
from tolaria.core.cancel import CancellationToken
from tolaria.core.events import Error, Init, ToolDone, ToolStart, Usage
from tolaria.core.modelchat.client import CANCELLED_TOOL_RESULT, ChatHelper
from tolaria.core.modelchat.history import ChatHistoryStore
from tolaria.core.modelchat.models_list import ModelListError, list_models
from tolaria.core.modelchat.tools import Toolbox, ToolError
from tolaria.core.programs.discovery import detect

SECRET = "sk-test-0123456789-very-secret"


@pytest.fixture(autouse=True)
def no_system_keyring() -> Iterator[None]:
    """A missing key must not reach the developer's real keyring (keyring's null backend)."""
    import keyring
    from keyring.backends import null

    previous = keyring.get_keyring()
    keyring.set_keyring(null.Keyring())
    yield
    keyring.set_keyring(previous)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    yield srv
    srv.stop()


def chat_manifest(server: FakeOpenAIServer, **extra: Any) -> Manifest:
    extra.setdefault("permissions", "full")  # safe mode's asking: tests/core/modelchat/test_chat_safe_mode.py
    return Manifest(id="fake-chat", name="Fake chat", protocol="openai-chat", command=(),
                    base_url=server.base_url, model="fake-model", **extra)


def helper(server: FakeOpenAIServer, cwd: Path, collector: Collector | None = None,
           **kwargs: Any) -> ChatHelper:
    return ChatHelper(server.base_url, "fake-model", cwd=cwd, on_event=collector, grace_s=0.3,
                      **kwargs)




def saved_history(session_id: str | None) -> list[dict[str, Any]]:
    """The model chat saved under the data dir (what a restarted Tolaria continues)."""
    assert session_id
    saved = ChatHistoryStore().load(session_id)
    assert saved is not None
    return saved.messages


def slow_text(pieces: int = 200, delay: float = 0.05) -> Reply:
    return text_reply("x" * pieces, pieces=pieces, delay=delay)


# --- plain answers and the tool loop ----------------------------------------------------------


@async_test
async def test_plain_streamed_answer(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(text_reply("Hello from the model"))
    events = Collector()
    chat = helper(server, tmp_path, events)
    assert await chat.prompt("hi") == "end_turn"
    assert events.kinds() == ["text_delta"] * 3 + ["usage"]
    assert events.text() == "Hello from the model"
    usage = events.events[-1]
    assert isinstance(usage, Usage) and (usage.input_tokens, usage.output_tokens) == (7, 11)
    assert chat.messages[-1] == {"role": "assistant", "content": "Hello from the model"}
    body = server.requests[0].body
    assert body["stream"] is True and body["model"] == "fake-model"
    assert {t["function"]["name"] for t in body["tools"]} == {
        "read_file", "list_directory", "search_text", "run_command"}
    assert "authorization" not in server.requests[0].headers


@async_test
async def test_non_streaming_path(server: FakeOpenAIServer, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    server.script(tool_reply(("c1", "read_file", {"path": "a.txt"})), text_reply("It says alpha"))
    events = Collector()
    chat = helper(server, tmp_path, events, stream=False)
    assert await chat.prompt("read a.txt") == "end_turn"
    assert [r.body["stream"] for r in server.requests] == [False, False]
    assert events.text() == "It says alpha"
    assert chat.messages[-2] == {"role": "tool", "tool_call_id": "c1", "content": "alpha\n"}


@async_test
async def test_tool_loop_lists_directory_then_answers(server: FakeOpenAIServer,
                                                     tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text("x")
    (work / "src").mkdir()
    server.script(tool_reply(("call_1", "list_directory", {"path": "."})),
                  text_reply("There are notes.md and src/"))
    run = start_run(chat_manifest(server), "what is here?", cwd=work)
    done = await run.finish()
    assert done.stop_reason == "end_turn"
    kinds = run.collector.kinds()
    assert kinds[0] == "init" and kinds[-1] == "done"
    assert kinds[1:3] == ["tool_start", "tool_done"]
    start, finish = run.collector.of("tool_start")[0], run.collector.of("tool_done")[0]
    assert isinstance(start, ToolStart) and isinstance(finish, ToolDone)
    assert (start.tool_id, start.name, start.input) == ("call_1", "list_directory", {"path": "."})
    assert finish.output == "notes.md\nsrc/" and not finish.is_error
    second = server.requests[1].body["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "notes.md\nsrc/"}
    assert_history_valid(second)
    assert run.collector.text() == "There are notes.md and src/"


@async_test
async def test_run_command_output_and_resume(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": "echo hi; exit 3"})),
                  text_reply("done"))
    run = start_run(chat_manifest(server), "run it", cwd=tmp_path)
    await run.finish()
    finish = run.collector.of("tool_done")[0]
    assert isinstance(finish, ToolDone)
    assert finish.output == "exit code 3\nhi\n" and finish.is_error
    init = run.collector.events[0]
    assert isinstance(init, Init) and init.session_id
    # The next turn of the same session sends the whole history.
    resumed = start_run_with_session(server, tmp_path, init.session_id)
    await resumed.finish()
    resumed_init = resumed.collector.events[0]
    assert isinstance(resumed_init, Init) and resumed_init.session_id == init.session_id
    history = server.requests[2].body["messages"]
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "assistant",
                                            "user"]
    assert_history_valid(history)


def start_run_with_session(server: FakeOpenAIServer, cwd: Path, session_id: str | None) -> Any:
    from helpers import LiveRun

    from tolaria.core.process.registry import ProcessRegistry
    from tolaria.core.stream_id import new_stream_id
    from tolaria.core.turns.runner import RunRequest, stream_ai_agent

    server.script(text_reply("resumed"))
    registry, sid, collector = ProcessRegistry(), new_stream_id(), Collector()
    request = RunRequest(chat_manifest(server), "continue", str(cwd), {}, session_id)
    task = asyncio.ensure_future(stream_ai_agent(request, sid, collector, registry=registry))
    return LiveRun(sid, registry, collector, task)


@async_test
async def test_max_iterations(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(*(tool_reply((f"c{n}", "list_directory", {})) for n in range(3)),
                  text_reply("never asked for"))
    events = Collector()
    chat = helper(server, tmp_path, events, max_iterations=2)
    assert await chat.prompt("loop") == "max_iterations"
    assert len(server.requests) == 3
    last = chat.messages[-1]
    assert last["tool_call_id"] == "c2" and "max_iterations" in last["content"]
    assert_history_valid(chat.messages)


# --- cancellation -----------------------------------------------------------------------------


@async_test
async def test_cancel_after_first_of_two_tools(server: FakeOpenAIServer, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    server.script(tool_reply(("c1", "read_file", {"path": "a.txt"}),
                             ("c2", "list_directory", {"path": "."})),
                  text_reply("never asked for"), text_reply("next prompt"))
    events = Collector()
    flag = {"cancel": False}
    chat = helper(server, tmp_path, events, on_cancel_check=lambda: flag["cancel"])

    def on_event(event: Any) -> None:
        events(event)
        if isinstance(event, ToolDone) and event.tool_id == "c1":
            flag["cancel"] = True

    chat._on_event = on_event
    assert await chat.prompt("two tools") == "cancelled"
    assert len(server.requests) == 1  # no continuation after the cancel
    tools = [m for m in chat.messages if m["role"] == "tool"]
    assert tools == [{"role": "tool", "tool_call_id": "c1", "content": "a"},
                     {"role": "tool", "tool_call_id": "c2", "content": CANCELLED_TOOL_RESULT}]
    done = [e for e in events.events if isinstance(e, ToolDone)]
    assert [(d.tool_id, d.is_error) for d in done] == [("c1", False), ("c2", True)]
    # The next prompt (a fresh scope once the callback says so) sends a valid history.
    flag["cancel"] = False
    assert await chat.prompt("again") == "end_turn"
    assert_history_valid(server.requests[1].body["messages"])


@async_test
async def test_tool_calls_reply_then_cancel_sends_nothing_more(server: FakeOpenAIServer,
                                                              tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "list_directory", {})), text_reply("never asked for"))
    chat = helper(server, tmp_path)
    chat._on_event = lambda e: chat.cancel() if isinstance(e, ToolStart) else None
    # The cancel lands while the first tool runs; the reply asked for tools, yet nothing follows.
    assert await chat.prompt("go") == "cancelled"
    assert len(server.requests) == 1
    assert_history_valid(chat.messages)


@async_test
async def test_finish_reason_tool_calls_plus_cancel(server: FakeOpenAIServer,
                                                   tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": "touch ran"})),
                  text_reply("never asked for"))
    events = Collector()
    chat = helper(server, tmp_path, events)
    on_chunk = chat._on_chunk

    def cancel_at_finish(data: dict[str, Any], reply: Any) -> None:
        on_chunk(data, reply)
        if reply.finish_reason == "tool_calls":
            chat.cancel()

    chat._on_chunk = cancel_at_finish  # type: ignore[method-assign]
    assert await chat.prompt("go") == "cancelled"
    assert len(server.requests) == 1
    assert not (tmp_path / "ran").exists()
    assert "tool_start" not in events.kinds() or events.of("tool_done")[0].output == (  # type: ignore[attr-defined]
        CANCELLED_TOOL_RESULT)
    assert_history_valid(chat.messages)


@async_test
async def test_abort_during_slow_stream_closes_the_connection(server: FakeOpenAIServer,
                                                             tmp_path: Path) -> None:
    server.script(slow_text(pieces=1000, delay=0.01))
    run = start_run(chat_manifest(server), "talk slowly", cwd=tmp_path)
    await wait_until(lambda: len(run.collector.of("text_delta")) >= 3, 10, "some text")
    aborted_at = time.monotonic()
    assert run.abort()
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert time.monotonic() - aborted_at < 0.5
    partial = run.collector.text()
    assert 3 <= len(partial) < 1000
    await wait_until(lambda: server.client_closed_at is not None, 2, "the server to see the close")
    # The server notices on its next write after the close (it writes every 10 ms).
    assert server.client_closed_at is not None and server.client_closed_at - aborted_at < 0.1
    init = run.collector.events[0]
    assert isinstance(init, Init)
    history = saved_history(init.session_id)
    assert history[-1] == {"role": "assistant", "content": partial}


@async_test
async def test_abort_running_command_kills_it(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": "sleep 300"})),
                  text_reply("never asked for"))
    run = start_run(chat_manifest(server), "sleep", cwd=tmp_path)
    await wait_until(lambda: marker_pids(run.stream_id), 10, "the command to start")
    assert run.abort()
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert_run_gone(run.stream_id)
    assert len(server.requests) == 1
    finish = run.collector.of("tool_done")[0]
    assert isinstance(finish, ToolDone)
    assert finish.output == CANCELLED_TOOL_RESULT and finish.is_error
    init = run.collector.events[0]
    assert isinstance(init, Init)
    history = saved_history(init.session_id)
    assert history[-1] == {"role": "tool", "tool_call_id": "c1", "content": CANCELLED_TOOL_RESULT}
    assert_history_valid(history)


@async_test
async def test_cancelled_task_still_kills_the_command(server: FakeOpenAIServer,
                                                     tmp_path: Path) -> None:
    server.script(tool_reply(("c1", "run_command", {"command": "sleep 300"})))
    run = start_run(chat_manifest(server), "sleep", cwd=tmp_path)
    await wait_until(lambda: marker_pids(run.stream_id), 10, "the command to start")
    run.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run.task
    assert run.collector.kinds().count("done") == 1
    assert run.collector.done.stop_reason == "cancelled"
    assert_run_gone(run.stream_id)


@async_test
async def test_shared_token_cancels_both_helpers(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(slow_text(), slow_text())
    token = CancellationToken()
    first, second = Collector(), Collector()
    a = helper(server, tmp_path, first, cancellation=token)
    b = helper(server, tmp_path, second, cancellation=token)
    assert a.cancellation is token and b.cancellation is token
    tasks = [asyncio.ensure_future(a.prompt("one")), asyncio.ensure_future(b.prompt("two"))]
    await wait_until(lambda: first.text() and second.text(), 10, "both to stream")
    started = time.monotonic()
    a.cancel()  # the same-process shortcut flips the shared token
    assert await asyncio.wait_for(asyncio.gather(*tasks), 2) == ["cancelled", "cancelled"]
    assert time.monotonic() - started < 0.5
    assert token.cancelled


def _cancel_in_child(token: CancellationToken) -> None:
    token.cancel()


@async_test
async def test_cancel_from_another_process(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(slow_text())
    events = Collector()
    chat = helper(server, tmp_path, events)
    task = asyncio.ensure_future(chat.prompt("talk"))
    await wait_until(lambda: events.text(), 10, "streaming")
    child = multiprocessing.get_context("fork").Process(target=_cancel_in_child,
                                                        args=(chat.cancellation,))
    child.start()
    await asyncio.to_thread(child.join, 10)
    assert child.exitcode == 0
    assert await asyncio.wait_for(task, 1) == "cancelled"
    assert chat.messages[-1]["content"] == events.text()


@async_test
async def test_injected_token_is_not_reset_by_prompt(server: FakeOpenAIServer,
                                                    tmp_path: Path) -> None:
    token = CancellationToken()
    token.cancel()
    chat = helper(server, tmp_path, cancellation=token)
    assert await chat.prompt("hi") == "cancelled"
    assert token.cancelled and server.requests == []
    token.reset()  # only its owner does this
    server.script(text_reply("ok"))
    assert await chat.prompt("hi again") == "end_turn"


@async_test
async def test_owned_token_gets_a_fresh_scope_each_prompt(server: FakeOpenAIServer,
                                                         tmp_path: Path) -> None:
    server.script(text_reply("ok"))
    chat = helper(server, tmp_path)
    chat.cancel()
    assert chat.cancellation.cancelled
    assert await chat.prompt("hi") == "end_turn"
    assert not chat.cancellation.cancelled


@async_test
async def test_api_key_never_in_events(server: FakeOpenAIServer, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CHAT_KEY", SECRET)
    server.script(tool_reply(("c1", "run_command", {"command": "env; echo $FAKE_CHAT_KEY"})),
                  text_reply("ok"))
    run = start_run(chat_manifest(server, api_key_env="FAKE_CHAT_KEY"), "show env", cwd=tmp_path)
    done = await run.finish()
    assert done.stop_reason == "end_turn"
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(run.collector.events)
    assert "FAKE_CHAT_KEY" not in run.collector.of("tool_done")[0].output  # type: ignore[attr-defined]
    assert SECRET not in repr(server.requests[1].body)


@async_test
async def test_missing_api_key_and_unreachable_server(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAKE_CHAT_KEY", raising=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    manifest = Manifest(id="fake-chat", name="Fake chat", protocol="openai-chat", command=(),
                        base_url=f"http://127.0.0.1:{port}/v1", model="m",
                        api_key_env="FAKE_CHAT_KEY")
    run = start_run(manifest, "hi", cwd=tmp_path)
    done = await run.finish()
    assert done.stop_reason == "error"
    assert "FAKE_CHAT_KEY" in run.collector.of("error")[0].message  # type: ignore[attr-defined]
    run = start_run(Manifest(**{**manifest.__dict__, "api_key_env": ""}), "hi", cwd=tmp_path)
    done = await run.finish()
    assert done.stop_reason == "error"
    message = run.collector.of("error")[0].message  # type: ignore[attr-defined]
    assert "cannot reach" in message and "not running" in message, message
    assert "All connection attempts failed" not in message and message.endswith("send again")


@async_test
async def test_http_error_and_error_in_stream(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(Reply([{"error": {"message": "model 'nope' not found"}}]))
    events = Collector()
    chat = helper(server, tmp_path, events, api_key=SECRET)
    assert await chat.prompt("hi") == "error"
    assert "model 'nope' not found" in events.of("error")[0].message  # type: ignore[attr-defined]
    assert await chat.prompt("nothing scripted: HTTP 500") == "error"
    assert "HTTP 500" in events.of("error")[1].message  # type: ignore[attr-defined]
    assert SECRET not in repr(events.events)


# --- tools, manifests, discovery --------------------------------------------------------------


def test_paths_are_confined_to_the_working_folder(tmp_path: Path) -> None:
    inside = tmp_path / "work"
    inside.mkdir()
    (inside / "ok.txt").write_text("ok")
    (tmp_path / "secret.txt").write_text("no")
    (inside / "link").symlink_to(tmp_path / "secret.txt")
    box = Toolbox(inside, "s-test")
    assert box.resolve("ok.txt") == (inside / "ok.txt").resolve()
    assert box.resolve(str(inside / "ok.txt")) == (inside / "ok.txt").resolve()
    for bad in ("../secret.txt", str(tmp_path / "secret.txt"), "/etc/passwd", "link"):
        with pytest.raises(ToolError, match="outside the working folder"):
            box.resolve(bad)
    result = asyncio.run(box.call("read_file", {"path": "../secret.txt"}, lambda: False,
                                  asyncio.Event()))
    assert result.is_error and "outside the working folder" in result.output


def test_search_text(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def foo():\n    return 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("foo = 2\n")
    box = Toolbox(tmp_path, "s-test")
    out = box.search_text({"pattern": r"foo"}, lambda: False)
    assert out.splitlines() == ["a.py:1: def foo():", "sub/b.py:1: foo = 2"]


def test_builtin_model_manifests_and_discovery() -> None:
    adapters = load_adapters(user_dir=Path("/nonexistent"))
    assert adapters.errors == []
    urls = {k: adapters.get(k).base_url for k in ("ollama", "lmstudio", "llamacpp", "openai")}
    assert urls == {"ollama": "http://localhost:11434/v1", "lmstudio": "http://localhost:1234/v1",
                    "llamacpp": "http://localhost:8080/v1", "openai": "https://api.openai.com/v1"}
    assert adapters.get("openai").api_key_env == "OPENAI_API_KEY"
    found = asyncio.run(detect(adapters.get("ollama")))
    assert (found.path, found.version) == ("http://localhost:11434/v1", None)
    # This machine may or may not run Ollama: either it is up, or the next step is said.
    assert found.error in (None, "not running: start it with `ollama serve`")


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({}, "base_url"),
        ({"base_url": "localhost:11434"}, "base_url"),
        ({"base_url": "http://x/v1"}, "model"),
        ({"base_url": "http://x/v1", "model": "m", "command": ["x"]}, "command"),
        ({"base_url": "http://x/v1", "model": "m", "api_key_env": "sk-abc"}, "api_key_env"),
        ({"base_url": "http://x/v1", "model": "m", "max_iterations": -1}, "max_iterations"),
    ],
)
def test_bad_chat_manifests(extra: dict[str, Any], key: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_manifest({"id": "m", "protocol": "openai-chat", **extra})
    assert err.value.key == key


def test_chat_keys_only_for_openai_chat() -> None:
    with pytest.raises(ManifestError) as err:
        parse_manifest({"id": "m", "protocol": "lines", "command": ["x"], "model": "m"})
    assert err.value.key == "model"


# --- secrets in errors ------------------------------------------------------------------------


@async_test
async def test_every_secret_of_the_table_is_masked_in_a_model_error(
        server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared table (tests/redact_cases.py) in an error the endpoint streams back: the chat
    shows it without the secrets (the key, and everything else the policy calls secret)."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    texts = [leak.text for leak in LEAKS] + list(HARMLESS) + [f"your key {SECRET} was refused"]
    server.script(Reply([{"error": {"message": "\n".join(texts)}}]))
    events = Collector()
    chat = helper(server, tmp_path, events, api_key=SECRET)
    assert await chat.prompt("hi") == "error"
    [error] = [e for e in events.events if isinstance(e, Error)]
    for leak in LEAKS:
        assert leak.secret not in error.message and leak.kept in error.message, leak
    for harmless in HARMLESS:
        assert harmless in error.message
    assert SECRET not in error.message and "your key *** was refused" in error.message


def test_a_model_list_error_is_masked_too(server: FakeOpenAIServer) -> None:
    server.models_status, server.models_raw = 500, (
        b"upstream: export GH_PAT=hunter2hunter2; using key sk-abc123xyz now")
    with pytest.raises(ModelListError) as caught:
        list_models(chat_manifest(server), 5)
    message = str(caught.value)
    assert "hunter2" not in message and "sk-abc123xyz" not in message
    assert "HTTP 500: upstream: export GH_PAT=***; using key *** now" in message
