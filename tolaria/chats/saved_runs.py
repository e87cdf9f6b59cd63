"""``tolaria run`` keeps its turn in the window's store, so it survives a crash and shows up in
the window's sidebar afterwards.

The same SQLite store as the window (tolaria/core/store/db.py): a conversation per run by default,
titled from the prompt, or ``--chat ID`` to add a turn to an existing one. Events are appended as
they are printed; the store's flusher commits them every 50 ms, so a SIGKILL of ``tolaria run``
loses at most about that much, and the next ``Store()`` opened (the window's, another ``tolaria
run``'s) reads the turn as ``interrupted`` with its partial output.

A new chat is named from its first prompt and a follow-up (``--chat``) resumes the agent's own
session or sends the earlier turns along by the window's own rules, in one place:
``ChatService.next_turn`` (tolaria/chats/service.py; ``tolaria run`` keeps no agent process).

Opening the store marks ``running`` turns as interrupted (crash recovery), except the turns
another Tolaria process (a window, another ``tolaria run``) is streaming right now, found through
the control sockets (``control.live_stream_ids``).

In a git folder the turn is checkpointed like a window turn (tolaria/chats/checkpoints.py): a
snapshot before the agent starts and after it ends, the changed files recorded on the turn.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tolaria.chats.checkpoints import TurnCheckpoints
from tolaria.chats.service import ChatService
from tolaria.chats.titles import DEFAULT_TITLE
from tolaria.core.events import Done, Event
from tolaria.core.process import control
from tolaria.core.store.db import ORIGIN_COMMAND_LINE, Conversation, Store
from tolaria.core.turns.request import RunRequest


class ChatError(ValueError):
    """A ``--chat`` that names no stored conversation."""


def open_store(path: Path | None = None) -> Store:
    """The window's store. Turns that other Tolaria processes are streaming right now are left
    running (only turns of crashed processes are marked interrupted)."""
    return Store(path, live_elsewhere=control.live_stream_ids())


class SavedRun:
    """One ``tolaria run`` turn in the store: ``open`` → ``begin`` → ``record`` → ``close``."""

    def __init__(self, store: Store, conversation: Conversation | None) -> None:
        self.store = store
        self.conversation = conversation
        self.stream_id: str | None = None
        self._done = False
        self._checkpoints = TurnCheckpoints(store)
        self._turn_id: int | None = None
        self._cwd: str | None = None

    @classmethod
    def open(cls, chat_id: int | None, path: Path | None = None) -> SavedRun:
        store = open_store(path)
        conversation = None
        if chat_id is not None:
            conversation = store.get_conversation(chat_id)
            if conversation is None:
                store.close()
                raise ChatError(f"no chat {chat_id} (see `tolaria chats`)")
        return cls(store, conversation)

    @property
    def agent(self) -> str | None:
        """The continued chat's agent (the default for ``--agent``)."""
        return self.conversation.agent if self.conversation is not None else None

    @property
    def chat_id(self) -> int | None:
        return self.conversation.id if self.conversation is not None else None

    def begin(self, request: RunRequest, stream_id: str, *, explicit_cwd: str | None) -> RunRequest:
        """Record the running turn; returns the request with the prompt the agent gets (the
        history preamble, or the session to resume) and the chat's folder.

        ValueError when ``stream_id`` already has a turn (a reused ``--stream-id``).
        """
        agent = request.manifest.id
        conversation = self.conversation
        if conversation is None:
            cwd = os.path.abspath(request.cwd or os.getcwd())
            conversation = self.store.create_conversation(DEFAULT_TITLE, agent, cwd,
                                                          origin=ORIGIN_COMMAND_LINE)
        else:
            cwd = os.path.abspath(explicit_cwd) if explicit_cwd else (
                conversation.cwd or os.path.abspath(request.cwd or os.getcwd()))
            if conversation.agent != agent or conversation.cwd != cwd:
                conversation = self.store.update_conversation(conversation.id, agent=agent,
                                                              cwd=cwd)
        turn = ChatService(self.store).next_turn(conversation, request.prompt, request.manifest)
        self.conversation = turn.conversation
        started = self.store.start_turn(conversation.id, stream_id, agent, request.prompt)
        self.stream_id = stream_id
        self._turn_id = started.id
        self._cwd = cwd
        return dataclasses.replace(request, prompt=turn.full_prompt, session_id=turn.resume_id,
                                   cwd=cwd)

    def snapshot_before(self) -> None:
        """The folder's state before the agent touches it (a git folder only), as in the window:
        blocking, run in a thread once ``tolaria abort`` can reach the run; ``stop_snapshot``
        (a Stop meanwhile) kills it."""
        if self._turn_id is not None and self.conversation is not None and self._cwd:
            self._checkpoints.take_before(self.conversation, self._turn_id, self._cwd)

    def stop_snapshot(self) -> None:
        if self._turn_id is not None:
            self._checkpoints.cancel_before(self._turn_id)

    def record(self, on_event: Callable[[Event], None]) -> Callable[[Event], None]:
        """``on_event`` that also stores each event (before passing it on)."""

        def store_then(event: Event) -> None:
            self.store.append_event(event)
            if isinstance(event, Done):
                self._done = True
            on_event(event)

        return store_then

    def close(self) -> None:
        """A turn that never got its ``Done`` (a bug, an interrupt before the run started) is
        marked interrupted; what the turn changed in a git folder is recorded (the window shows
        it under the turn); then the store is flushed and closed."""
        try:
            if self.stream_id is not None and not self._done:
                self.store.mark_interrupted(self.stream_id)
            if self._turn_id is not None and self.conversation is not None:
                self._checkpoints.record_after(self.conversation, self._turn_id)  # any end
        finally:
            self.store.close()


@dataclass(frozen=True)
class ChatSummary:
    """One line of ``tolaria chats``."""

    id: int
    title: str
    agent: str
    cwd: str | None
    updated_at: float
    turns: int
    last_status: str | None
    agent_session_id: str | None

    def line(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.updated_at))
        return (f"{self.id:>5}  {when}  {self.agent:<12} {self.last_status or 'no turns':<11} "
                f"{self.title}")


def list_chats(store: Store) -> list[ChatSummary]:
    """``tolaria chats``: every conversation, newest activity first, with its last turn."""
    out = []
    for c in store.list_conversations():
        turns = store.turns(c.id)
        out.append(ChatSummary(c.id, c.title, c.agent, c.cwd, c.updated_at, len(turns),
                               turns[-1].status if turns else None, c.agent_session_id))
    return out
