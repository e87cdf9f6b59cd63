"""An imported CLI session continues natively: the real CLI resumes its own session, history and all.

The session file is one the real CLI wrote (tests/fixtures/sessions), laid into a throwaway HOME
where the CLI looks for it; ``tolaria import`` makes it a chat; the chat's next turn runs the
real CLI with the session id the import kept, and the model request it sends carries the earlier
turns, which only the CLI's own session file holds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from e2e.clis import run_env
from e2e.e2ehelpers import TURN_S, installed_cli, manifest
from e2e.fake_model import TEXT_REPLY, FakeModelServer
from helpers import Collector, async_test, marker_pids

from tolaria.chats.importing import import_sessions
from tolaria.chats.service import ChatService
from tolaria.core.events import Init
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
