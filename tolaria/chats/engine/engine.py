"""The turn engine: one chat turn's whole life, for the window and ``tolaria run`` alike.

A turn is planned (``ChatService``: history or the session to resume, the chat's title),
recorded (``Store.start_turn``), reserved in the process registry the moment its stream id is
handed out (every stop from then on reaches it: Stop, Esc, Stop all, ``tolaria abort``, Ctrl+C,
deleting the chat, quitting), checkpointed before the agent starts (a stop meanwhile ends the turn
without starting it), run by ``stream_ai_agent`` in a task, and checkpointed again when it ends,
whatever the end. Its events pass the stream gate (tolaria/chats/engine/gate.py), which stores
each one and drops what a stopped run still says. The front end hears facts through a
``TurnObserver``: the window's bridge turns them into signals, ``tolaria run``'s printer prints.

Each conversation runs at most one turn at a time; several conversations may run at once. A
message sent while a turn runs is queued (tolaria/chats/engine/queueing.py) and becomes the next
turn's prompt when the running one ends; "Restart turn" stops the running turn the normal way and
re-runs its ``Launch`` unchanged. Both happen one event-loop turn after the run's end, so every
view has seen the old run end first. Each such action is a store marker (``message_queued``,
``messages_delivered``, ``stop_requested``, ``turn_restarted``). A stopped turn stays in the
next prompt's history, marked "[stopped by the user]"; a restarted (abandoned) one is left out.

``tolaria run`` drives the same engine with no agent process kept (no ``keepers``), no queue
(``queues=False``) and, with ``--no-save``, no store at all (nothing planned, recorded or
checkpointed: the request goes as it is).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType

from tolaria.chats.attachments import AttachmentDesk, agent_refusal
from tolaria.chats.checkpoints import TurnCheckpoints, until_stopped
from tolaria.chats.engine.chatting import ConversationPart
from tolaria.chats.engine.control import ControlPart
from tolaria.chats.engine.gate import StreamGate
from tolaria.chats.engine.leaving import LeavingPart, attaching
from tolaria.chats.engine.limits import JobBudget, LimitWatcher, chat_limits, set_chat_limits
from tolaria.chats.engine.observer import PermissionDesk, TurnObserver
from tolaria.chats.engine.queueing import QueuePart
from tolaria.chats.engine.snapshots import SnapshotPart
from tolaria.chats.inflight import Launch, MessageQueues
from tolaria.chats.mentions.hosted import hosted_mentions
from tolaria.chats.run_config import RunConfig
from tolaria.chats.service import ChatService
from tolaria.config.remote_hosts import on_host
from tolaria.core.adapters.manifest import AdapterSet, Manifest
from tolaria.core.attachments.model import Attachment
from tolaria.core.events import STOP_CANCELLED, STOP_ERROR, Done, Error, Event
from tolaria.core.limits import RunLimits
from tolaria.core.process.registry import ProcessRegistry, Run
from tolaria.core.store.db import MARKER_STOP_REQUESTED, Conversation, Marker, Store, Turn
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.keeper import KeeperPool
from tolaria.core.turns.runner import DEFAULT_GRACE_S, RunRequest, stream_ai_agent
from tolaria.support import platforms
from tolaria.support.tasks import TaskSet

log = logging.getLogger(__name__)


class TurnEngine(ControlPart, QueuePart, SnapshotPart, ConversationPart, LeavingPart):
    """Owns every turn of one front end (see the module docstring). No Qt; asyncio."""

    def __init__(self, store: Store | None, registry: ProcessRegistry, observer: TurnObserver,
                 tasks: TaskSet, *, adapters: AdapterSet | None = None,
                 gate: StreamGate | None = None, grace_s: float = DEFAULT_GRACE_S,
                 retry_limit_s: float | None = None, keepers: KeeperPool | None = None,
                 permissions: PermissionDesk | None = None, queues: bool = True) -> None:
        self.store = store
        self.registry = registry
        self.observer = observer
        self.tasks = tasks
        self.adapters = adapters
        self.grace_s = grace_s
        #: Overrides the settings' retry limit when set (the window's Preferences and tests).
        self.retry_limit_s = retry_limit_s
        #: Preferences (agent overrides, polite window) applied to each new run.
        self.run_config = RunConfig()
        #: The default limits of each new run (None: the Preferences' ``[limits]``); a chat's
        #: own override them.
        self.limits: RunLimits | None = None
        #: The limit watchers of live runs (limits.py), by stream id.
        self._watchers: dict[str, LimitWatcher] = {}
        #: Each chat's kept agent process (docs/adr/0009); ``tolaria run`` keeps none.
        self.keepers = keepers
        self.permissions = permissions
        #: Answers ssh's own questions of a chat's turn (ADR 0033): (chat id, ssh command) ->
        #: the ssh client's askpass environment, {} when it cannot (BatchMode stays on).
        #: None (``tolaria run``): nobody to ask.
        self.ssh_askpass: Callable[[int, str], dict[str, str]] | None = None
        #: The chat rules: titles, history, the resume decision.
        self.chats = ChatService(store) if store is not None else None
        #: Messages queued behind running turns, kept in the store (queueing.py).
        self.queues = MessageQueues(store) if store is not None and queues else None
        #: Git snapshots before and after each turn (snapshots.py).
        self.checkpoints = TurnCheckpoints(store) if store is not None else None
        self.gate = gate if gate is not None else StreamGate()
        self.gate.record = store.append_event if store is not None else None
        self.gate.on_finished = self._run_ended
        self.observe(observer)
        #: conversation id -> stream id of its running turn
        self._running: dict[int, str] = {}
        self._conversation_of: dict[str, int] = {}
        self._deleting: set[int] = set()
        self._launches: dict[str, Launch] = {}
        self._turn_ids: dict[str, int] = {}
        #: streams being stopped to be re-run (stream id -> its launch)
        self._restarting: dict[str, Launch] = {}
        #: streams whose turn is stored and whose ``Done`` has not passed the gate yet
        self._unfinished: set[str] = set()
        self._closing = False

    def observe(self, observer: TurnObserver) -> None:
        """Tell the facts to ``observer`` from now on."""
        self.observer = observer
        self.gate.on_event = observer.event
        self.gate.on_stopping = observer.run_stopping

    # -- queries --------------------------------------------------------------------------------
    def running_stream(self, conversation_id: int) -> str | None:
        return self._running.get(conversation_id)

    def running_count(self) -> int:
        return len(self._running)

    def conversation_of(self, stream_id: str) -> int | None:
        return self._conversation_of.get(stream_id)

    @property
    def launches(self) -> Mapping[str, Launch]:
        """How each live turn was launched (a restart re-runs it unchanged), by stream id."""
        return MappingProxyType(self._launches)

    def answered_turns(self, conversation_id: int) -> list[Turn]:
        """The conversation's turns without the abandoned (restarted) attempts."""
        return self.service.answered_turns(conversation_id)

    @property
    def db(self) -> Store:
        if self.store is None:
            raise RuntimeError("this turn engine keeps no store (tolaria run --no-save)")
        return self.store

    @property
    def service(self) -> ChatService:
        if self.chats is None:
            raise RuntimeError("this turn engine keeps no store (tolaria run --no-save)")
        return self.chats

    @staticmethod
    def keep_key(conversation_id: int) -> str:
        """The key of a conversation's kept agent process."""
        return f"conversation-{conversation_id}"

    # -- a turn -------------------------------------------------------------------------------
    def send(self, conversation_id: int, prompt: str, *, delivering: Sequence[int] = (),
             budget: JobBudget | None = None,
             attachments: Sequence[Attachment] = ()) -> str | None:
        """Start a turn; returns its stream id (None if the conversation is busy or gone, or
        this platform cannot stop a run as promised: Windows, ADR 0014). ``delivering``: the
        queued messages ``prompt`` is made of, delivered in the store transaction that records
        the turn (``Store.start_turn``). ``budget``: a fan-out job's, shared with its other
        runs (limits.py). ``attachments``: stored copies sent with the prompt (ADR 0028); an
        image the agent cannot take is refused here, before anything is recorded."""
        if conversation_id in self._running or conversation_id in self._deleting:
            return None
        refusal = platforms.run_refusal()
        if refusal is not None:  # said to the user; the prompt stays in the composer
            self.observer.problem_reported(refusal)
            return None
        conversation = self.db.get_conversation(conversation_id)
        if conversation is None:
            return None
        launch = self.plan(conversation, prompt, attachments=attachments)
        problem = self._attachment_refusal(launch)
        if problem is None and attachments and conversation.host:
            problem = (f"Attachments do not work on another host yet: the agent on "
                       f"{conversation.host} cannot read this machine's files.")
        if problem is not None:  # said to the user; the prompt and its chips stay
            self.observer.problem_reported(problem)
            return None
        try:
            return self._launch(launch, delivering=delivering, budget=budget)
        except (sqlite3.Error, OSError) as exc:  # the turn could not be stored: not started
            # The window's store notice says why (Store.write_listener); the prompt stays in
            # the composer, which empties only when a run starts.
            log.warning("could not start a turn of conversation %s: %s", conversation_id, exc)
            return None

    def plan(self, conversation: Conversation, prompt: str, *, manifest: Manifest | None = None,
             cwd: str | None = None, attachments: Sequence[Attachment] = ()) -> Launch:
        """What the next turn of ``conversation`` sends (``ChatService.next_turn``: history or
        the session to resume, the title of a new chat), in ``cwd`` (default: the chat's)."""
        if manifest is None and self.adapters is not None:
            manifest = self.adapters.manifests.get(conversation.agent)
        kept = (self.keepers.session_id(self.keep_key(conversation.id))
                if self.keepers is not None else None)
        turn = self.service.next_turn(conversation, prompt, manifest, kept_session=kept)
        if conversation.host:  # a folder on the host, as typed ("": its home)
            cwd = cwd or conversation.cwd or ""
        else:
            cwd = cwd or (conversation.cwd if conversation.cwd else os.getcwd())
        return Launch(conversation.id, prompt, turn.full_prompt, turn.resume_id,
                      conversation.agent, cwd, tuple(attachments))

    def _attachment_refusal(self, launch: Launch) -> str | None:
        if not launch.attachments:
            return None
        manifest = self.adapters.manifests.get(launch.agent) if self.adapters else None
        problem = agent_refusal(manifest, launch.attachments) if manifest is not None else None
        return problem or AttachmentDesk(self.store).missing(launch.attachments)

    def record(self, launch: Launch, stream_id: str, *, delivering: Sequence[int] = ()) -> Turn:
        """Store the turn as running (raises sqlite3.Error/OSError when it cannot be, and
        ValueError when ``stream_id`` already has a turn)."""
        turn = self.db.start_turn(launch.conversation_id, stream_id, launch.agent, launch.prompt,
                                  delivering=delivering, attachments=launch.attachments)
        self._launches[stream_id] = launch
        self._turn_ids[stream_id] = turn.id
        self._unfinished.add(stream_id)
        return turn

    def _launch(self, launch: Launch, *, delivering: Sequence[int] = (),
                budget: JobBudget | None = None) -> str:
        stream_id = new_stream_id()
        turn = self.record(launch, stream_id, delivering=delivering)
        self.start(launch, stream_id, turn, budget=budget)
        return stream_id

    def start(self, launch: Launch, stream_id: str, turn: Turn | None, *,
              request: RunRequest | None = None, run: Run | None = None,
              limits: RunLimits | None = None, budget: JobBudget | None = None
              ) -> asyncio.Task[None] | None:
        """Run a recorded turn (``turn``; None: nothing stored) in a task; the ``Done`` comes
        through the gate whatever happens. ``request``: as it is (``tolaria run``: its own
        settings already applied), else built from the launch and the current settings.
        ``run``: reserved by the caller already (``tolaria run`` does it before its signal
        handlers go in). ``limits``: this run's (default: ``limits_for`` the chat). None when
        the turn ended at once (an unknown or disabled agent)."""
        conversation_id = launch.conversation_id
        on_event = self.gate.open_stream(stream_id)
        limits = (limits if limits is not None else self.limits_for(conversation_id)).effective()
        if limits.active() or budget is not None:
            watcher = LimitWatcher(stream_id, limits, on_event,
                                   lambda kind: self._stop_for_limit(stream_id, kind),
                                   budget=budget)
            watcher.start(asyncio.get_running_loop())
            self._watchers[stream_id] = watcher
            on_event = watcher.deliver
        self._running[conversation_id] = stream_id
        self._conversation_of[stream_id] = conversation_id
        if turn is not None:
            self.observer.run_started(stream_id, conversation_id, turn)
            saved = self.db.get_conversation(conversation_id)
            if saved is not None:
                self.observer.conversation_saved(saved)
        if request is None:
            built = self._request(launch)
            if isinstance(built, str):
                on_event(Error(stream_id, message=built))
                on_event(Done(stream_id, stop_reason=STOP_ERROR))
                return None
            request = built
        if run is None:
            # Known to the registry from now on: a stop in this very loop iteration, during
            # the snapshot or the spawn reaches the run (it then ends without starting).
            run = self.registry.reserve(stream_id, request.manifest.id, launch.cwd)
        # A folder on a host is snapshotted there (ADR 0035): the same checkpoints.
        # A run taken back on its host (ADR 0032) keeps the before-state of its first start.
        before = None
        if turn is not None and request.target is not None \
                and request.target.attach_offset is not None:
            self._resume_before(launch, turn.id)
        elif turn is not None:
            before = self._snapshot_before(launch, turn.id)
        task = self.tasks.spawn(self._run(request, run, on_event, before,
                                          turn.id if turn is not None else 0),
                                name=stream_id)
        task.add_done_callback(lambda t: self._on_run_task_done(t, run, on_event))
        return task

    def limits_for(self, conversation_id: int) -> RunLimits:
        """The limits of the chat's next run: its own where set, else the defaults."""
        defaults = self.limits if self.limits is not None else self.run_config.settings.run_limits()
        return chat_limits(self.store, conversation_id).over(defaults)

    def set_chat_limits(self, conversation_id: int, limits: RunLimits) -> None:
        """Keep the chat's own limits (from its next run on; a running one keeps its own)."""
        try:
            set_chat_limits(self.db, conversation_id, limits)
        except KeyError:
            return  # deleted meanwhile
        conversation = self.db.get_conversation(conversation_id)
        if conversation is not None:
            self.observer.conversation_saved(conversation)

    def _stop_for_limit(self, stream_id: str, kind: str) -> None:
        """A limit was reached: the normal stop (polite, then the tree), with a marker that
        names the limit."""
        if not self.stop_stream(stream_id):
            return  # ending by itself already: its own Done stands
        conversation_id = self._conversation_of.get(stream_id)
        if conversation_id is not None and self.store is not None and conversation_id in \
                self._running and stream_id in self._turn_ids:
            self._mark(conversation_id, MARKER_STOP_REQUESTED, stream_id,
                       {"stream_id": stream_id, "limit": kind})

    def _request(self, launch: Launch) -> RunRequest | str:
        """The run's request with the current settings, or why it cannot run."""
        manifest = self.adapters.manifests.get(launch.agent) if self.adapters else None
        if manifest is None:
            known = ", ".join(sorted(self.adapters.manifests if self.adapters else ())) or "none"
            return f"Unknown agent {launch.agent!r} (known: {known}). Pick another agent."
        try:
            options = self.run_config.configure(manifest)
        except ValueError as exc:  # disabled in Preferences, or overrides that cannot apply
            return str(exc)
        if self.retry_limit_s is not None:
            options = dataclasses.replace(options, retry_limit_s=self.retry_limit_s)
        conversation_id = launch.conversation_id
        conversation = self.store.get_conversation(conversation_id) if self.store else None
        host = conversation.host if conversation is not None else None
        request = options.request(
            launch.full_prompt, cwd=launch.cwd, session_id=launch.resume_id,
            on_permission=(self.permissions.hook(conversation_id)
                           if self.permissions is not None else None),
            keep_key=self.keep_key(conversation_id) if self.keepers is not None else None,
            hosted=hosted_mentions(host, launch.cwd or "") if host else None)
        request = dataclasses.replace(request, attachments=launch.attachments)
        if conversation is None or not conversation.host:
            return request
        # The same settings as ``tolaria run --host``. Where the window can answer ssh's
        # questions (host key, passphrase: ADR 0033) BatchMode goes; else ssh refuses them.
        remote = on_host(request, conversation.host, keep_running=conversation.keep_running)
        if isinstance(remote, str) or self.ssh_askpass is None:
            return remote
        target = remote.target
        if target is None or target.ssh is None:
            return remote
        askpass = self.ssh_askpass(conversation_id, target.ssh_command)
        if not askpass:
            return remote
        return dataclasses.replace(remote, target=dataclasses.replace(
            target, interactive=True, askpass_env=askpass))

    async def _run(self, request: RunRequest, run: Run, on_event: Callable[[Event], None],
                   before: Awaitable[None] | None, turn_id: int = 0) -> None:
        stream_id = run.stream_id
        started = time.monotonic()
        try:
            if before is not None:
                # The folder's state before the agent touches it (never raises); a Stop
                # meanwhile kills the snapshot's git at once instead of waiting for it.
                await until_stopped(before, run)
                self.observer.agent_starting(stream_id)
                if (run.stop_requested or self._closing) and not attaching(request):
                    if self.checkpoints is not None:
                        self.checkpoints.cancel_before(turn_id)
                    # Stopped (or quitting) while the snapshot was taken: the agent never starts.
                    on_event(Done(stream_id, stop_reason=STOP_CANCELLED, duration_ms=0))
                    return
            else:
                self.observer.agent_starting(stream_id)
            await stream_ai_agent(request, stream_id, on_event, registry=self.registry,
                                  grace_s=self.grace_s, keepers=self.keepers, run=run)
        except Exception as exc:
            # The runner reports what goes wrong in a run as events; this is a bug or a bad
            # request. The front end must still leave the running state.
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

    def _run_ended(self, stream_id: str, done: Done) -> None:
        """The gate let the run's ``Done`` through (stored already)."""
        self._unfinished.discard(stream_id)
        watcher = self._watchers.pop(stream_id, None)
        if watcher is not None:
            watcher.cancel()
        if self.permissions is not None:
            self.permissions.close_stream(stream_id)
        conversation_id = self._conversation_of.pop(stream_id, None)
        self._launches.pop(stream_id, None)
        turn_id = self._turn_ids.pop(stream_id, None)
        if conversation_id is not None:
            if turn_id is not None:
                self._snapshot_after(conversation_id, turn_id)  # now: before any next turn's
            if self._running.get(conversation_id) == stream_id:
                del self._running[conversation_id]
            if stream_id in self._restarting or (self.queues is not None
                                                 and self.queues.get(conversation_id)):
                # After every view has seen this run end (the next loop turn).
                asyncio.get_running_loop().call_soon(self._after_finish, conversation_id,
                                                     stream_id)
            if conversation_id not in self._deleting and self.store is not None:
                conversation = self.store.get_conversation(conversation_id)
                if conversation is not None:
                    self.observer.conversation_saved(conversation)
        self.observer.run_finished(stream_id, done)

    def _mark(self, conversation_id: int, kind: str, stream_id: str | None,
              data: object = None) -> Marker | None:
        turn_id = self._turn_ids.get(stream_id) if stream_id is not None else None
        if turn_id is None and stream_id is not None:
            turn = self.db.turn_by_stream(stream_id)
            turn_id = turn.id if turn is not None else None
        return self.db.add_marker(conversation_id, kind, turn_id=turn_id,
                                  data=data if data is not None else {"stream_id": stream_id})

    def reattach_kept(self) -> list[str]:
        """At start, after a crash or a kill: the turns of keep-running chats left running on
        their host are taken back - reattached to the run there, its output replayed from its
        start (the stored part replaced), Stop working as usual; a run the host no longer has
        ends with that said (ADR 0032). Their stream ids."""
        taken = []
        for turn in self.db.kept_remote_turns():
            conversation = self.db.get_conversation(turn.conversation_id)
            launch = Launch(turn.conversation_id, turn.prompt, turn.prompt, None, turn.agent,
                            conversation.cwd or "" if conversation else "")
            built = self._request(launch)
            resumed = self.db.resume_turn(turn.stream_id)
            if isinstance(built, str) or built.target is None or resumed is None:
                self.db.mark_interrupted(turn.stream_id)
                continue
            request = dataclasses.replace(built, keep_key=None, target=dataclasses.replace(
                built.target, attach_offset=0))
            self._launches[turn.stream_id] = launch
            self._turn_ids[turn.stream_id] = turn.id
            self._unfinished.add(turn.stream_id)
            self.start(launch, turn.stream_id, resumed, request=request)
            taken.append(turn.stream_id)
        return taken

    def mark_unfinished_interrupted(self) -> None:
        """A stored turn that never got its ``Done`` (a bug, an interrupt before the run
        started) is marked interrupted, with what it said."""
        for stream_id in sorted(self._unfinished):
            self.db.mark_interrupted(stream_id)
        self._unfinished.clear()
