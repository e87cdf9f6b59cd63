"""Turns the window's intents into core and store calls; reports facts through the bridge.

One controller serves every conversation. Each conversation runs at most one turn at a time,
under its own stream id; several conversations may run at once. Stopping, deleting and
shutting down always go through the registry, which waits until the run's tree is gone.

Operator control of in-flight work (issue 6): a message sent while a turn runs is queued (in the
store, tolaria/qt/queue_control.py) and becomes the next turn's prompt when the running one ends
(a Stop ends it at once); "Restart turn" stops the running turn the normal way and re-runs its
``Launch`` unchanged. Both happen one event-loop turn after ``run_finished``, so every view has
seen the old run end first. Each such action is recorded as a store marker (``message_queued``,
``messages_delivered``, ``stop_requested``, ``turn_restarted``).

A turn's run is reserved in the registry the moment ``send`` hands out its stream id (before the
run's task first runs, before the checkpoint snapshot): every stop from then on (Stop, Esc, Stop
all, ``tolaria abort``, deleting the chat, quitting) reaches it, and it ends ``cancelled``.

In a git folder each turn is checkpointed (tolaria/qt/checkpoint_control.py): a snapshot before
the agent starts (a Stop meanwhile ends the turn without starting it) and one after it ends.

Permission questions of running turns (an ACP agent's, a model chat's commands in "safe" mode)
are asked in the chat through ``PermissionBroker`` (tolaria/qt/permissions.py), which also keeps
the conversation's "allow always" answers in memory.

What a turn sends (the history preamble or the resumed session) and a new chat's title come from
``ChatService`` (tolaria/chats/service.py), the rules ``tolaria run`` follows too; this controller
adds the chat's kept agent process and turns the results into signals. A stopped turn stays in
the next prompt's history, marked "[stopped by the user]"; a restarted (abandoned) one is left out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence

from PySide6.QtCore import QObject, QTimer

from tolaria.chats.checkpoints import TurnCheckpoints, until_stopped
from tolaria.chats.inflight import Launch, MessageQueues
from tolaria.chats.review import TurnReview
from tolaria.chats.run_config import RunConfig
from tolaria.chats.service import ChatService
from tolaria.core.adapters.manifest import AdapterSet
from tolaria.core.events import STOP_CANCELLED, STOP_ERROR, Done, Error, Event
from tolaria.core.process.registry import ProcessRegistry, Run
from tolaria.core.programs import discovery
from tolaria.core.store.db import (
    MARKER_STOP_REQUESTED,
    MARKER_TURN_RESTARTED,
    Conversation,
    Marker,
    Store,
    Turn,
)
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.keeper import KeeperPool
from tolaria.core.turns.runner import (
    DEFAULT_GRACE_S,
    DEFAULT_RETRY_LIMIT_S,
    RunRequest,
    stream_ai_agent,
)
from tolaria.qt.bridge import Bridge
from tolaria.qt.checkpoint_control import CheckpointControl
from tolaria.qt.conversation_control import ConversationControl
from tolaria.qt.permissions import PermissionBroker
from tolaria.qt.queue_control import QueueControl
from tolaria.qt.tasks import TaskSet
from tolaria.support import platforms

log = logging.getLogger(__name__)


class ChatController(QueueControl, CheckpointControl, ConversationControl, QObject):
    def __init__(self, bridge: Bridge, store: Store, registry: ProcessRegistry,
                 adapters: AdapterSet, tasks: TaskSet, *, grace_s: float = DEFAULT_GRACE_S,
                 retry_limit_s: float = DEFAULT_RETRY_LIMIT_S,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.store = store
        #: The chat rules shared with ``tolaria run``: titles, history, the resume decision.
        self.chats = ChatService(store)
        self.registry = registry
        self.adapters = adapters
        self.tasks = tasks
        self.grace_s = grace_s
        #: ``[behaviour] retry_limit_seconds``: how long an agent may retry before it is stopped.
        self.retry_limit_s = retry_limit_s
        #: Preferences (agent overrides, polite window) applied to each new run.
        self.run_config = RunConfig()
        #: conversation id -> stream id of its running turn
        self._running: dict[int, str] = {}
        self._conversation_of: dict[str, int] = {}
        self._deleting: set[int] = set()
        self._launches: dict[str, Launch] = {}
        self._turn_ids: dict[str, int] = {}
        #: streams being stopped to be re-run (stream id -> its launch)
        self._restarting: dict[str, Launch] = {}
        #: Messages queued behind running turns, kept in the store (tolaria/qt/queue_control.py).
        self.queues = MessageQueues(store)
        #: Git snapshots before and after each turn (tolaria/qt/checkpoint_control.py).
        self.checkpoints = TurnCheckpoints(store)
        #: A changed file's diff, hunk by hunk, with Accept / Revert (tolaria/chats/review.py).
        self.review = TurnReview(self.checkpoints)
        #: Permission questions of running turns, answered in the chat.
        self.permissions = PermissionBroker(bridge, store)
        self._closing = False
        #: Each chat's kept agent process (docs/adr/0009): closed when the chat is deleted, when
        #: its agent or folder changes, after an idle timeout, and at shutdown.
        self.keepers = KeeperPool(grace_s=grace_s)
        bridge.event_received.connect(self._on_bridge_event_received)
        bridge.run_finished.connect(self._on_bridge_run_finished)

    # -- queries --------------------------------------------------------------------------------
    def running_stream(self, conversation_id: int) -> str | None:
        return self._running.get(conversation_id)

    def running_count(self) -> int:
        return len(self._running)

    def conversations(self) -> list[Conversation]:
        return self.store.list_conversations()

    # -- runs -----------------------------------------------------------------------------------
    def send(self, conversation_id: int, prompt: str, *,
             delivering: Sequence[int] = ()) -> str | None:
        """Start a turn; returns its stream id (None if the conversation is busy or gone, or
        this platform cannot stop a run as promised: Windows, ADR 0014). ``delivering``: the
        queued messages ``prompt`` is made of, delivered in the store transaction that records
        the turn (``Store.start_turn``)."""
        if conversation_id in self._running or conversation_id in self._deleting:
            return None
        refusal = platforms.run_refusal()
        if refusal is not None:  # said in the window; the prompt stays in the composer
            self.bridge.problem_reported.emit(refusal)
            return None
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            return None
        turn = self.chats.next_turn(conversation, prompt,
                                    self.adapters.manifests.get(conversation.agent),
                                    kept_session=self.keepers.session_id(
                                        self.keep_key(conversation_id)))
        cwd = conversation.cwd if conversation.cwd else os.getcwd()
        try:
            return self._launch(Launch(conversation_id, prompt, turn.full_prompt,
                                       turn.resume_id, conversation.agent, cwd),
                                delivering=delivering)
        except (sqlite3.Error, OSError) as exc:  # the turn could not be stored: not started
            # The window's store notice says why (Store.write_listener); the prompt stays in
            # the composer, which empties only when a run starts.
            log.warning("could not start a turn of conversation %s: %s", conversation_id, exc)
            return None

    def _launch(self, launch: Launch, *, delivering: Sequence[int] = ()) -> str:
        conversation_id = launch.conversation_id
        stream_id = new_stream_id()
        turn = self.store.start_turn(conversation_id, stream_id, launch.agent, launch.prompt,
                                     delivering=delivering)
        self._launches[stream_id] = launch
        self._turn_ids[stream_id] = turn.id
        manifest = self.adapters.manifests.get(launch.agent)
        on_event = self.bridge.open_stream(stream_id)
        self._running[conversation_id] = stream_id
        self._conversation_of[stream_id] = conversation_id
        self.bridge.run_started.emit(stream_id, conversation_id, turn)
        saved = self.store.get_conversation(conversation_id)
        if saved is not None:
            self.bridge.conversation_saved.emit(saved)
        if manifest is None:
            known = ", ".join(sorted(self.adapters.manifests)) or "none"
            on_event(Error(stream_id, message=f"Unknown agent {launch.agent!r} "
                                              f"(known: {known}). Pick another agent."))
            on_event(Done(stream_id, stop_reason=STOP_ERROR))
            return stream_id
        try:
            options = self.run_config.configure(manifest)
        except ValueError as exc:  # disabled in Preferences, or overrides that cannot apply
            on_event(Error(stream_id, message=str(exc)))
            on_event(Done(stream_id, stop_reason=STOP_ERROR))
            return stream_id
        # The controller's retry limit: Preferences (and tests) set it on the controller.
        options = dataclasses.replace(options, retry_limit_s=self.retry_limit_s)
        request = options.request(launch.full_prompt, cwd=launch.cwd,
                                  session_id=launch.resume_id,
                                  on_permission=self.permissions.hook(conversation_id),
                                  keep_key=self.keep_key(conversation_id))
        # Known to the registry from now on: a stop in this very loop iteration, during the
        # snapshot or the spawn reaches the run (it then ends without starting the agent).
        run = self.registry.reserve(stream_id, manifest.id, launch.cwd)
        before = self._snapshot_before(launch, turn.id)
        task = self.tasks.spawn(self._run(request, run, on_event, before, turn.id),
                                name=stream_id)
        task.add_done_callback(lambda t: self._on_run_task_done(t, run, on_event))
        return stream_id

    async def _run(self, request: RunRequest, run: Run, on_event: Callable[[Event], None],
                   before: Awaitable[None] | None, turn_id: int = 0) -> None:
        stream_id = run.stream_id
        started = time.monotonic()
        try:
            if before is not None:
                # The folder's state before the agent touches it (never raises); a Stop
                # meanwhile kills the snapshot's git at once instead of waiting for it.
                await until_stopped(before, run)
                if run.stop_requested or self._closing:
                    self.checkpoints.cancel_before(turn_id)
                    # Stopped (or quitting) while the snapshot was taken: the agent never starts.
                    on_event(Done(stream_id, stop_reason=STOP_CANCELLED, duration_ms=0))
                    return
            await stream_ai_agent(request, stream_id, on_event, registry=self.registry,
                                  grace_s=self.grace_s, keepers=self.keepers, run=run)
        except Exception as exc:
            # The runner reports what goes wrong in a run as events; this is a bug or a bad
            # request. The view must still leave the running state.
            log.exception("run %s failed", stream_id)
            on_event(Error(stream_id, message=f"Tolaria could not run the agent: {exc}"))
            on_event(Done(stream_id, stop_reason=STOP_ERROR,
                          duration_ms=int((time.monotonic() - started) * 1000)))

    def _on_run_task_done(self, task: asyncio.Task[None], run: Run,
                          on_event: Callable[[Event], None]) -> None:
        """The run's task ended: a task cancelled before it reported (quitting while it waited
        for the snapshot, or before it ever ran) still ends its turn, and its reserved run."""
        if task.cancelled() and not run.finished.done():
            on_event(Done(run.stream_id, stop_reason=STOP_CANCELLED))  # dropped if already done
        self.registry.unregister(run)  # idempotent: the runner has done it for a run it ran

    def stop(self, conversation_id: int) -> bool:
        """Stop the conversation's running turn (returns at once; ``run_finished`` follows).
        True if this call stopped it; a second Stop, or one after the run ended, is a no-op."""
        stream_id = self._running.get(conversation_id)
        if stream_id is None:
            return False
        # The stop holds the run's content back only if it takes: a Stop in the moment the
        # agent has already ended by itself keeps the tail still draining from its pipes.
        aborted = self.bridge.stop(stream_id, lambda: self.registry.abort(stream_id))
        if aborted:
            self._mark(conversation_id, MARKER_STOP_REQUESTED, stream_id)  # after: stop first
        return aborted

    def answer_permission(self, stream_id: str, key: str, option_id: str) -> bool:
        """The user answered a permission question of a running turn."""
        return self.permissions.answer(stream_id, key, option_id)

    def restart(self, conversation_id: int) -> bool:
        """Abandon the running turn (the normal stop: polite, then the tree killed) and re-run
        its prompt with the same history and settings once it has ended."""
        stream_id = self._running.get(conversation_id)
        launch = self._launches.get(stream_id) if stream_id is not None else None
        if stream_id is None or launch is None or stream_id in self._restarting:
            return False
        self._restarting[stream_id] = launch
        self.bridge.stop(stream_id, lambda: self.registry.abort(stream_id))
        self._mark(conversation_id, MARKER_STOP_REQUESTED, stream_id,
                   {"stream_id": stream_id, "for": "restart"})
        return True

    def retry(self, conversation_id: int, stream_id: str, prompt: str) -> str | None:
        """Run ``prompt`` (a failed or stopped turn's own, or its edited text) in place of the
        ended turn ``stream_id``: that attempt is abandoned as a restart leaves it (kept,
        collapsed, out of the next prompts' history). None if the chat is busy or gone."""
        if conversation_id in self._running or conversation_id in self._deleting \
                or not prompt.strip():
            return None
        old = self.store.turn_by_stream(stream_id)
        if old is None or old.conversation_id != conversation_id or old.status == "running":
            return None
        self._mark(conversation_id, MARKER_TURN_RESTARTED, stream_id,
                   {"stream_id": stream_id, "for": "retry"})
        new_stream = self.send(conversation_id, prompt)
        if new_stream is not None:
            self.bridge.turn_restarted.emit(conversation_id, stream_id, new_stream)
        return new_stream

    def _after_finish(self, conversation_id: int, stream_id: str) -> None:
        """One loop turn after ``run_finished``: re-run a restarted turn, or deliver the queue."""
        restart = self._restarting.pop(stream_id, None)
        if self._closing or conversation_id in self._deleting or conversation_id in self._running:
            return
        if self.store.get_conversation(conversation_id) is None:
            return
        if restart is not None:
            new_stream = self._launch(restart)
            self._mark(conversation_id, MARKER_TURN_RESTARTED, stream_id,
                       {"stream_id": stream_id, "restarted_as": new_stream})
            self.bridge.turn_restarted.emit(conversation_id, stream_id, new_stream)
            return
        self._deliver(conversation_id)

    def _mark(self, conversation_id: int, kind: str, stream_id: str | None,
              data: object = None) -> Marker | None:
        turn_id = self._turn_ids.get(stream_id) if stream_id is not None else None
        if turn_id is None and stream_id is not None:
            turn = self.store.turn_by_stream(stream_id)
            turn_id = turn.id if turn is not None else None
        return self.store.add_marker(conversation_id, kind, turn_id=turn_id,
                                     data=data if data is not None else {"stream_id": stream_id})

    def answered_turns(self, conversation_id: int) -> list[Turn]:
        """The conversation's turns without the abandoned (restarted) attempts."""
        return self.chats.answered_turns(conversation_id)

    def stop_all(self) -> list[str]:
        running = list(self._running.items())
        aborted = self.bridge.stop_all([stream_id for _conversation_id, stream_id in running],
                                       self.registry.abort_all)
        for conversation_id, stream_id in running:  # recorded after the stop went out
            if stream_id in aborted:
                self._mark(conversation_id, MARKER_STOP_REQUESTED, stream_id)
        return aborted

    async def shutdown(self) -> None:
        """Stop every run and wait until their trees are gone; end the other tasks."""
        self._closing = True  # no restart or queued delivery starts a run now
        self.pause_queues_at_quit()  # shown again, paused, at the next start
        # (a run finishing by itself keeps its tail)
        self.bridge.stop_all(list(self._running.values()), self.registry.abort_all)
        await self.registry.abort_all_and_wait()
        await self.keepers.close_all()  # the chats' kept agents, trees gone
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
        self.permissions.close_stream(stream_id)
        conversation_id = self._conversation_of.pop(stream_id, None)
        self._launches.pop(stream_id, None)
        turn_id = self._turn_ids.pop(stream_id, None)
        if conversation_id is None:
            return
        if turn_id is not None:
            self._snapshot_after(conversation_id, turn_id)  # now: before any next turn's
        if self._running.get(conversation_id) == stream_id:
            del self._running[conversation_id]
        if stream_id in self._restarting or self.queues.get(conversation_id):
            # After every view has seen this run end (the next loop turn).
            QTimer.singleShot(0, self, lambda: self._after_finish(conversation_id, stream_id))
        if conversation_id not in self._deleting:
            conversation = self.store.get_conversation(conversation_id)
            if conversation is not None:
                self.bridge.conversation_saved.emit(conversation)
