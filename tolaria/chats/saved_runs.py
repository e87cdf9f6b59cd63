"""``tolaria run`` keeps its turn in the window's store, so it survives a crash and shows up in
the window's sidebar afterwards.

The same SQLite store as the window (tolaria/core/store/db.py): a conversation per run by default,
titled from the prompt, or ``--chat ID`` to add a turn to an existing one. The turn is planned,
recorded, checkpointed and run by the window's own turn engine (tolaria/chats/engine/), without
a queue or a kept agent process: a new chat is named from its first prompt and a follow-up
(``--chat``) resumes the agent's own session or sends the earlier turns along by the window's
rules (``ChatService.next_turn``), each event is stored as it passes the engine's stream gate
(before it is printed), and in a git folder the turn gets its snapshots before and after. The
store's flusher commits events every 50 ms, so a SIGKILL of ``tolaria run`` loses at most about
that much, and the next ``Store()`` opened (the window's, another ``tolaria run``'s) reads the
turn as ``interrupted`` with its partial output.

``open_store`` is the one way for scripts and benchmarks to open the window's store: opening it
marks ``running`` turns as interrupted (crash recovery), except the turns another Tolaria
process (a window, another ``tolaria run``) is streaming right now, found through the control
sockets (``control.live_stream_ids``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tolaria.chats.mentions.forms import render_mentions
from tolaria.core.process import control
from tolaria.core.store.db import ORIGIN_COMMAND_LINE, Conversation, Store, Turn

if TYPE_CHECKING:
    from tolaria.chats.engine import TurnEngine
    from tolaria.chats.inflight import Launch
    from tolaria.core.turns.request import RunRequest


class ChatError(ValueError):
    """A ``--chat`` that names no stored conversation."""


def open_store(path: Path | None = None) -> Store:
    """The window's store. Turns that other Tolaria processes are streaming right now are left
    running (only turns of crashed processes are marked interrupted)."""
    return Store(path, live_elsewhere=control.live_stream_ids())


class SavedRun:
    """One ``tolaria run`` turn in the store: ``open`` → ``begin`` → the engine runs it
    (``engine.start``, tolaria/cli/main.py) → ``close``."""

    def __init__(self, store: Store, conversation: Conversation | None) -> None:
        self.store = store
        self.conversation = conversation
        self.stream_id: str | None = None
        # Imported here: ``open_store`` (scripts, ``tolaria chats``, ``changes``...) stays light.
        from tolaria.chats.engine import QuietObserver, TurnEngine
        from tolaria.core.process.registry import default_registry
        from tolaria.support.tasks import TaskSet

        #: The window's turn engine, without a queue or kept agent processes.
        self.engine: TurnEngine = TurnEngine(store, default_registry(), QuietObserver(),
                                             TaskSet(), queues=False)
        #: The planned turn and its stored row, once ``begin`` recorded it.
        self.launch: Launch | None = None
        self.turn: Turn | None = None

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
    def host(self) -> str | None:
        """The continued chat's host (the default for ``--host``; None: this machine)."""
        return self.conversation.host if self.conversation is not None else None

    @property
    def chat_id(self) -> int | None:
        return self.conversation.id if self.conversation is not None else None

    def begin(self, request: RunRequest, stream_id: str, *, explicit_cwd: str | None,
              host: str | None = None, typed: str | None = None) -> RunRequest:
        """Record the running turn; returns the request with the prompt the agent gets (the
        history preamble, or the session to resume) and the chat's folder. ``host``: the
        destination as given to ``--host`` (kept with the chat, so ``--chat`` and the window
        continue there). ``typed``: the prompt as typed (``request.prompt`` has the agent's
        form of its ``@path`` mentions): stored as typed, like the window's, and put in the
        agent's form again with the history around it.

        ValueError when ``stream_id`` already has a turn (a reused ``--stream-id``).
        """
        agent = request.manifest.id
        conversation = self.conversation
        if request.target is not None:  # a folder on the host, as typed (or its home)
            cwd = explicit_cwd or request.cwd or (conversation.cwd if conversation else "") or ""
            if conversation is None:
                conversation = self.engine.new_conversation(agent, cwd,
                                                            origin=ORIGIN_COMMAND_LINE, host=host)
            else:
                if conversation.agent != agent:
                    conversation = self.store.update_conversation(conversation.id, agent=agent)
                if conversation.cwd != cwd or conversation.host != host:
                    conversation = self.store.set_conversation_host(conversation.id, host,
                                                                    cwd or None)
            if conversation.keep_running != request.target.keep_running:
                conversation = self.store.set_conversation_keep_running(
                    conversation.id, request.target.keep_running)
        elif conversation is None:
            cwd = os.path.abspath(request.cwd or os.getcwd())
            conversation = self.engine.new_conversation(agent, cwd, origin=ORIGIN_COMMAND_LINE)
        else:
            cwd = os.path.abspath(explicit_cwd) if explicit_cwd else (
                conversation.cwd or os.path.abspath(request.cwd or os.getcwd()))
            if conversation.agent != agent or conversation.cwd != cwd:
                conversation = self.store.update_conversation(conversation.id, agent=agent,
                                                              cwd=cwd)
        launch = self.engine.plan(conversation, request.prompt if typed is None else typed,
                                  manifest=request.manifest, cwd=cwd,
                                  attachments=request.attachments)
        self.conversation = self.store.get_conversation(conversation.id) or conversation
        self.turn = self.engine.record(launch, stream_id)
        self.stream_id = stream_id
        self.launch = launch
        full = launch.full_prompt
        links = request.mention_links
        if typed is not None and request.target is not None:  # listed there, nothing read here
            # Here, not at the top: ``tolaria usage`` and ``chats`` open the store through this
            # module and must not load the listing and checkpoint code.
            from tolaria.chats.mentions.hosted import listed_for, render_on_host

            there = listed_for(request.target, cwd or "", typed)
            full, links = render_on_host(full, request.manifest.protocol, cwd or "", there)
        elif typed is not None:  # as RunOptions.request does for the window's turns
            full = render_mentions(full, request.manifest.protocol, cwd or os.getcwd())
        return dataclasses.replace(request, prompt=full, session_id=launch.resume_id, cwd=cwd,
                                   mention_links=links)

    def close(self) -> None:
        """A turn that never got its ``Done`` (a bug, an interrupt before the run started) is
        marked interrupted; what the turn changed in a git folder is recorded if the engine
        could not (the window shows it under the turn); then the store is flushed and closed."""
        try:
            self.engine.mark_unfinished_interrupted()
            checkpoints = self.engine.checkpoints
            if self.turn is not None and self.conversation is not None \
                    and checkpoints is not None:  # a no-op once the engine recorded it
                checkpoints.record_after(self.conversation, self.turn.id)
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
