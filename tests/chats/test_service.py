"""The chat rules shared by the window and ``tolaria run`` (tolaria/chats/service.py), over a real
SQLite store: the first prompt names the chat, abandoned attempts are left out, and a follow-up
resumes the agent's own session only when that session answered last."""

from __future__ import annotations

from pathlib import Path

from helpers import stored_turn

from tolaria.chats.service import ChatService, resume_session
from tolaria.chats.titles import DEFAULT_TITLE, title_from_prompt
from tolaria.core.adapters.manifest import parse_manifest
from tolaria.core.store.db import MARKER_TURN_RESTARTED, Conversation, Store

RESUMING = parse_manifest({"id": "resumer", "protocol": "claude-stream-json",
                           "command": ["resumer", "{prompt}"],
                           "resume": ["--resume", "{session_id}"]})
ONE_SHOT = parse_manifest({"id": "oneshot", "protocol": "lines", "command": ["x", "{prompt}"]})


def _fresh(store: Store, chat_id: int) -> Conversation:
    store.flush()
    found = store.get_conversation(chat_id)
    assert found is not None
    return found


def test_the_first_prompt_names_a_default_titled_chat_only(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3")
    try:
        service = ChatService(store)
        chat = store.create_conversation(DEFAULT_TITLE, "oneshot", str(tmp_path))
        blank = service.next_turn(chat, "   ", ONE_SHOT)
        assert blank.conversation.title == DEFAULT_TITLE and blank.full_prompt == "   "
        first = service.next_turn(chat, "explain   the\nstore", ONE_SHOT)
        assert first.conversation.title == "explain the store"
        assert (first.full_prompt, first.resume_id) == ("explain   the\nstore", None)
        named = store.create_conversation("Mine", "oneshot", None)
        assert service.next_turn(named, "hello", ONE_SHOT).conversation.title == "Mine"
        assert title_from_prompt("x" * 100) == "x" * 47 + "…"
        assert title_from_prompt(" \n ") == DEFAULT_TITLE
    finally:
        store.close()


def test_history_leaves_out_abandoned_attempts_and_marks_stopped_turns(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3")
    try:
        service = ChatService(store)
        chat = store.create_conversation("c", "oneshot", None)
        stored_turn(store, chat.id, "oneshot", "first question", "first answer")
        abandoned = stored_turn(store, chat.id, "oneshot", "wedged", "never mind",
                                stop="cancelled")
        store.add_marker(chat.id, MARKER_TURN_RESTARTED, turn_id=abandoned, data={})
        stored_turn(store, chat.id, "oneshot", "second question", "partial",
                    stop="cancelled")
        turn = service.next_turn(_fresh(store, chat.id), "third", ONE_SHOT)
        assert turn.resume_id is None
        assert turn.full_prompt.startswith("Previous conversation:\n\nUser: first question")
        assert "wedged" not in turn.full_prompt and "never mind" not in turn.full_prompt
        assert "Assistant: partial\n[stopped by the user]" in turn.full_prompt
        assert turn.full_prompt.endswith("(end of previous conversation)\n\nthird")
        assert [t.prompt for t in service.answered_turns(chat.id)] == ["first question",
                                                                       "second question"]
    finally:
        store.close()


def test_resume_only_the_session_that_answered_last(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3")
    try:
        assert RESUMING.can_resume and not ONE_SHOT.can_resume
        service = ChatService(store)
        chat = store.create_conversation("c", "resumer", None)
        stored_turn(store, chat.id, "resumer", "q1", "a1", session="s-1")
        chat = _fresh(store, chat.id)
        assert chat.agent_session_id == "s-1"
        turn = service.next_turn(chat, "q2", RESUMING)
        assert (turn.resume_id, turn.full_prompt) == ("s-1", "q2")
        # An adapter that cannot resume sends the history instead...
        earlier = service.answered_turns(chat.id)
        assert resume_session(ONE_SHOT, chat, earlier) is None
        # ...unless the window's kept agent process holds that session.
        assert resume_session(ONE_SHOT, chat, earlier, kept_session="s-1") == "s-1"
        assert resume_session(ONE_SHOT, chat, earlier, kept_session="other") is None
        # Another agent answered last: its session is not this agent's to resume.
        stored_turn(store, chat.id, "oneshot", "q2", "a2")
        chat = _fresh(store, chat.id)
        other = service.next_turn(chat, "q3", RESUMING)
        assert other.resume_id is None and "User: q2" in other.full_prompt
        # No turns yet, nothing to resume.
        empty = store.create_conversation("e", "resumer", None)
        assert resume_session(RESUMING, empty, []) is None
        assert resume_session(None, chat, service.answered_turns(chat.id)) is None
    finally:
        store.close()

