"""Turns the window's intents into core and store calls; reports facts through the bridge.

One controller serves every conversation. Each conversation runs at most one turn at a time,
under its own stream id; several conversations may run at once. Stopping, deleting and
shutting down always go through the registry, which waits until the run's tree is gone.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from PySide6.QtCore import QObject

from tolaria.core import discovery
from tolaria.core.adapters import AdapterSet
from tolaria.core.events import STOP_ERROR, Done, Error, Event, TextDelta
from tolaria.core.registry import ProcessRegistry
from tolaria.core.runner import DEFAULT_GRACE_S, RunRequest, stream_ai_agent
from tolaria.core.store import Conversation, Store, Turn
from tolaria.core.stream_id import new_stream_id
from tolaria.qt.bridge import Bridge
from tolaria.qt.history import MAX_TURNS, Exchange, build_prompt
from tolaria.qt.tasks import TaskSet

log = logging.getLogger(__name__)

DEFAULT_TITLE = "New chat"
_TITLE_CHARS = 48


def title_from_prompt(prompt: str) -> str:
    line = " ".join(prompt.split())
    return line if len(line) <= _TITLE_CHARS else line[: _TITLE_CHARS - 1].rstrip() + "…"


class ChatController(QObject):
    def __init__(self, bridge: Bridge, store: Store, registry: ProcessRegistry,
                 adapters: AdapterSet, tasks: TaskSet, *, grace_s: float = DEFAULT_GRACE_S,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.store = store
        self.registry = registry
        self.adapters = adapters
        self.tasks = tasks
        self.grace_s = grace_s
        #: conversation id -> stream id of its running turn
        self._running: dict[int, str] = {}
        self._conversation_of: dict[str, int] = {}
        self._deleting: set[int] = set()
        bridge.event_received.connect(self._on_bridge_event_received)
        bridge.run_finished.connect(self._on_bridge_run_finished)

    # -- queries --------------------------------------------------------------------------------
    def running_stream(self, conversation_id: int) -> str | None:
        return self._running.get(conversation_id)

    def running_count(self) -> int:
        return len(self._running)

    def conversations(self) -> list[Conversation]:
        return self.store.list_conversations()

    # -- conversations --------------------------------------------------------------------------
    def load(self) -> list[Conversation]:
        """Announce every stored conversation (oldest first, so the newest ends up on top)."""
        found = self.store.list_conversations()
        for conversation in reversed(found):
            self.bridge.conversation_saved.emit(conversation)
        return found

    def new_conversation(self, agent: str, cwd: str | None) -> Conversation:
        conversation = self.store.create_conversation(DEFAULT_TITLE, agent, cwd)
        self.bridge.conversation_saved.emit(conversation)
        return conversation

    def open_conversation(self, conversation_id: int) -> None:
        """Send the stored transcript of a conversation to its (new) view."""
        history = [(turn, self.store.events(turn.id))
                   for turn in self.store.turns(conversation_id)]
        self.bridge.history_loaded.emit(conversation_id, history)

    def rename(self, conversation_id: int, title: str) -> None:
        title = " ".join(title.split())
        if not title:
            return
        self._save(lambda: self.store.rename_conversation(conversation_id, title))

    def set_agent(self, conversation_id: int, agent: str) -> None:
        self._save(lambda: self.store.update_conversation(conversation_id, agent=agent))

    def set_cwd(self, conversation_id: int, cwd: str) -> None:
        self._save(lambda: self.store.update_conversation(conversation_id, cwd=cwd))

    def _save(self, change: Callable[[], Conversation]) -> None:
        try:
            conversation = change()
        except KeyError:
            return  # deleted meanwhile
        self.bridge.conversation_saved.emit(conversation)

    def delete(self, conversation_id: int) -> None:
        """Delete a conversation; a running turn is stopped (tree gone) first."""
        if conversation_id in self._deleting:
            return
        stream_id = self._running.get(conversation_id)
        if stream_id is None:
            self._delete_now(conversation_id)
            return
        self._deleting.add(conversation_id)
        self.tasks.spawn(self._delete_after_stop(conversation_id, stream_id),
                         name=f"delete-{conversation_id}")

    async def _delete_after_stop(self, conversation_id: int, stream_id: str) -> None:
        try:
            self.bridge.mark_stopping(stream_id)
            await self.registry.abort_and_wait(stream_id)
            self._delete_now(conversation_id)
        finally:
            self._deleting.discard(conversation_id)

    def _delete_now(self, conversation_id: int) -> None:
        self.store.delete_conversation(conversation_id)
        self.bridge.conversation_deleted.emit(conversation_id)

    # -- runs -----------------------------------------------------------------------------------
    def send(self, conversation_id: int, prompt: str) -> str | None:
        """Start a turn; returns its stream id (None if the conversation is busy or gone)."""
        if conversation_id in self._running or conversation_id in self._deleting:
            return None
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            return None
        earlier = self.store.turns(conversation_id)
        manifest = self.adapters.manifests.get(conversation.agent)
        # Continue the agent's own session where the adapter can (Claude `--resume`): it keeps
        # the whole context, tools included. Otherwise the history travels in the prompt.
        resume_id = None
        if (manifest is not None and manifest.resume and conversation.agent_session_id
                and earlier and earlier[-1].agent == conversation.agent
                and earlier[-1].session_id == conversation.agent_session_id):
            resume_id = conversation.agent_session_id
        full_prompt = prompt if resume_id else build_prompt(self._exchanges(earlier), prompt)
        stream_id = new_stream_id()
        turn = self.store.start_turn(conversation_id, stream_id, conversation.agent, prompt)
        if not earlier and conversation.title == DEFAULT_TITLE and prompt.strip():
            self.store.rename_conversation(conversation_id, title_from_prompt(prompt))
        on_event = self.bridge.open_stream(stream_id)
        self._running[conversation_id] = stream_id
        self._conversation_of[stream_id] = conversation_id
        self.bridge.run_started.emit(stream_id, conversation_id, turn)
        self._save(lambda: self.store.get_conversation(conversation_id) or conversation)
        if manifest is None:
            known = ", ".join(sorted(self.adapters.manifests)) or "none"
            on_event(Error(stream_id, message=f"Unknown agent {conversation.agent!r} "
                                              f"(known: {known}). Pick another agent."))
            on_event(Done(stream_id, stop_reason=STOP_ERROR))
            return stream_id
        cwd = conversation.cwd if conversation.cwd else os.getcwd()
        request = RunRequest(manifest=manifest, prompt=full_prompt, cwd=cwd, session_id=resume_id)
        self.tasks.spawn(self._run(request, stream_id, on_event), name=stream_id)
        return stream_id

    async def _run(self, request: RunRequest, stream_id: str,
                   on_event: Callable[[Event], None]) -> None:
        started = time.monotonic()
        try:
            await stream_ai_agent(request, stream_id, on_event, registry=self.registry,
                                  grace_s=self.grace_s)
        except Exception as exc:
            # The runner reports what goes wrong in a run as events; this is a bug or a bad
            # request. The view must still leave the running state.
            log.exception("run %s failed", stream_id)
            on_event(Error(stream_id, message=f"Tolaria could not run the agent: {exc}"))
            on_event(Done(stream_id, stop_reason=STOP_ERROR,
                          duration_ms=int((time.monotonic() - started) * 1000)))

    def stop(self, conversation_id: int) -> bool:
        """Stop the conversation's running turn (returns at once; ``run_finished`` follows)."""
        stream_id = self._running.get(conversation_id)
        if stream_id is None:
            return False
        self.bridge.mark_stopping(stream_id)
        return self.registry.abort(stream_id)

    def stop_all(self) -> list[str]:
        for stream_id in list(self._running.values()):
            self.bridge.mark_stopping(stream_id)
        return self.registry.abort_all()

    async def shutdown(self) -> None:
        """Stop every run and wait until their trees are gone; end the other tasks."""
        for stream_id in list(self._running.values()):
            self.bridge.mark_stopping(stream_id)
        await self.registry.abort_all_and_wait()
        # The run tasks end right after their Done; detection and deletions are cancelled.
        await self.tasks.wait(timeout=2.0)
        await self.tasks.cancel_all()

    async def detect_agents(self) -> None:
        found = await discovery.detect_all(list(self.adapters.manifests.values()))
        self.bridge.agents_detected.emit(found)

    # -- bridge -> store --------------------------------------------------------------------------
    def _on_bridge_event_received(self, stream_id: str, event: object) -> None:
        if isinstance(event, Event):
            self.store.append_event(event)

    def _on_bridge_run_finished(self, stream_id: str, done: object) -> None:
        if isinstance(done, Done):
            self.store.append_event(done)
        conversation_id = self._conversation_of.pop(stream_id, None)
        if conversation_id is None:
            return
        if self._running.get(conversation_id) == stream_id:
            del self._running[conversation_id]
        if conversation_id not in self._deleting:
            conversation = self.store.get_conversation(conversation_id)
            if conversation is not None:
                self.bridge.conversation_saved.emit(conversation)

    def _exchanges(self, turns: list[Turn]) -> list[Exchange]:
        out = []
        for turn in turns[-MAX_TURNS:]:
            text = "".join(e.text for e in self.store.events(turn.id) if isinstance(e, TextDelta))
            out.append(Exchange(turn.prompt, text, turn.status))
        return out

