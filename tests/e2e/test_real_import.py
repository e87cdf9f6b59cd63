"""An imported CLI session continues natively: the real CLI resumes its own session, history and all.

The session file is one the real CLI wrote (tests/fixtures/sessions), laid into a throwaway HOME
where the CLI looks for it; ``tolaria import`` makes it a chat; the chat's next turn runs the
real CLI with the session id the import kept, and the model request it sends carries the earlier
turns, which only the CLI's own session file holds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import psutil
import pytest
from e2e.clis import run_env
from e2e.e2ehelpers import TURN_S, installed_cli, manifest
from e2e.fake_model import TEXT_REPLY, FakeModelServer
from helpers import Collector, async_test, marker_pids, wait_until

from tolaria.chats.importing import import_sessions
from tolaria.chats.service import ChatService
from tolaria.core.events import Init, TextDelta, ToolDone, ToolStart
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import Store
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SESSIONS = Path(__file__).resolve().parents[1] / "fixtures" / "sessions"


def lay_claude_session(home: Path, work: Path) -> str:
    """The captured Claude Code session, moved to ``work`` (Claude files sessions by folder)."""
    [source] = (SESSIONS / "claude" / ".claude" / "projects" / "-home-user-work").glob("*.jsonl")
    folder = home / ".claude" / "projects" / str(work).replace("/", "-").replace(".", "-")
    folder.mkdir(parents=True)
    (folder / source.name).write_text(source.read_text().replace("/home/user/work", str(work)))
    return source.stem


@async_test
async def test_an_imported_claude_session_resumes_in_the_real_cli(
        model_server: FakeModelServer, tmp_path: Path) -> None:
    cli = installed_cli("claude")
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = run_env(cli, home, model_server.url)
    native = lay_claude_session(home, work)
    store = Store(tmp_path / "store.sqlite3")
    try:
        [item] = import_sessions(store, home, ["claude"]).imported
        assert item.session_id == native
        chat = store.get_conversation(item.conversation_id)
        assert chat is not None and chat.cwd == str(work)
        m = manifest("claude")
        turn = ChatService(store).next_turn(chat, "E2E-TEXT: say hello again", m)
        assert turn.resume_id == native

        seen_before = len(model_server.requests("anthropic"))
        events = Collector()
        stream_id = new_stream_id()
        request = RunRequest(m, turn.full_prompt, str(work), env, session_id=turn.resume_id,
                             permission_mode="full")
        done = await asyncio.wait_for(
            stream_ai_agent(request, stream_id, events, registry=ProcessRegistry()), TURN_S)
        assert done.stop_reason == "end_turn", events.events[-10:]
        assert TEXT_REPLY in events.text()
        inits = [e.session_id for e in events.events if isinstance(e, Init)]
        assert native in inits
        # The CLI sent the imported history to the model: only its own session file had it.
        bodies = [str(s.body) for s in model_server.requests("anthropic")[seen_before:]]
        assert any("E2E-ECHO: run echo hi" in body and "say hello again" in body
                   for body in bodies)
        assert not marker_pids(stream_id)
    finally:
        store.close()


@async_test
async def test_a_session_imported_while_the_real_claude_runs_a_tool_is_completed_later(
        model_server: FakeModelServer, tmp_path: Path) -> None:
    """Issue 22 item 6 with the live CLI: imported while Claude's tool (``sleep 8``) runs, the
    turn is ``interrupted`` with its tool open; imported again once Claude is done, the same
    stored turn is ``completed`` with the tool's output and the answer, nothing twice."""
    cli = installed_cli("claude")
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = run_env(cli, home, model_server.url)
    store = Store(tmp_path / "store.sqlite3")
    stream_id = new_stream_id()
    try:
        request = RunRequest(manifest("claude"), "E2E-WAIT: run the waiting command", str(work),
                             env, permission_mode="full")
        task = asyncio.ensure_future(stream_ai_agent(request, stream_id, Collector(),
                                                     registry=ProcessRegistry()))

        def sleeping() -> bool:
            for pid in marker_pids(stream_id):
                try:
                    if psutil.Process(pid).cmdline()[:2] == ["sleep", "8"]:
                        return True
                except psutil.Error:
                    continue
            return False

        await wait_until(lambda: sleeping() or task.done(), TURN_S, "the tool's sleep")
        assert not task.done()
        [first] = import_sessions(store, home, ["claude"]).imported
        [turn] = store.turns(first.conversation_id)
        assert turn.status == "interrupted" and first.turns_unfinished == 1
        assert any(isinstance(e, ToolStart) for e in store.events(turn.id))
        assert not any(isinstance(e, ToolDone) for e in store.events(turn.id))

        done = await asyncio.wait_for(task, TURN_S)
        assert done.stop_reason == "end_turn"
        [second] = import_sessions(store, home, ["claude"]).imported
        assert (second.turns_added, second.turns_updated) == (0, 1)
        [again] = store.turns(first.conversation_id)
        assert again.id == turn.id and again.status == "completed"
        events = store.events(turn.id)
        [result] = [e for e in events if isinstance(e, ToolDone)]
        assert "started" in result.output and "finished" in result.output
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert text.count("I'll run it.") == 1 and "The command printed" in text
        assert import_sessions(store, home, ["claude"]).unchanged == 1
    finally:
        store.close()
    assert not marker_pids(stream_id)
