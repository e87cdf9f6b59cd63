"""The engine's part for what the user does to a running or ended turn: Stop (one, all), Restart,
Retry; what follows a turn's end one event-loop turn later (the restarted turn re-run, or the
queue delivered); and shutting down (every run stopped, trees gone, queues paused; a kept
remote run is let go instead: leaving.py).

A stop goes through the stream gate (tolaria/chats/engine/gate.py): the run's content is held
back while the registry's abort is asked, and stays held only if the abort took, so a stop in
the moment the agent ended by itself keeps the draining tail. Each action is a store marker
(``stop_requested``, ``turn_restarted``).
"""

from __future__ import annotations

from collections.abc import Callable

from tolaria.chats.engine.gate import StreamGate
from tolaria.chats.engine.observer import TurnObserver
from tolaria.chats.inflight import Launch
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import MARKER_STOP_REQUESTED, MARKER_TURN_RESTARTED, Marker, Store
from tolaria.core.turns.keeper import KeeperPool
from tolaria.support.tasks import TaskSet


class ControlPart:
    """Mixed into ``TurnEngine``, which provides the store, the observer and the runs."""

    store: Store | None
    registry: ProcessRegistry
    observer: TurnObserver
    tasks: TaskSet
    gate: StreamGate
    keepers: KeeperPool | None
    _running: dict[int, str]
    _deleting: set[int]
    _launches: dict[str, Launch]
    _restarting: dict[str, Launch]
    _closing: bool

    @property
    def db(self) -> Store:
        raise NotImplementedError

    # The engine's own (engine.py, queueing.py):
    send: Callable[..., str | None]
    _launch: Callable[..., str]
    _deliver: Callable[[int], str | None]
    pause_queues_at_quit: Callable[[], None]
    let_kept_go: Callable[[], list[str]]
    _mark: Callable[..., Marker | None]

    def stop_stream(self, stream_id: str) -> bool:
        """Stop a run (the registry's abort) with its content held back, kept held only if the
        stop took: a stop in the moment the agent ended by itself keeps the draining tail."""
        return self.gate.stop(stream_id, lambda: self.registry.abort(stream_id))

    def stop(self, conversation_id: int) -> bool:
        """Stop the conversation's running turn (returns at once; its end follows). True if
        this call stopped it; a second Stop, or one after the run ended, is a no-op."""
        stream_id = self._running.get(conversation_id)
        if stream_id is None:
            return False
        aborted = self.stop_stream(stream_id)
        if aborted:
            self._mark(conversation_id, MARKER_STOP_REQUESTED, stream_id)  # after: stop first
        return aborted

    def restart(self, conversation_id: int) -> bool:
        """Abandon the running turn (the normal stop: polite, then the tree killed) and re-run
        its prompt with the same history and settings once it has ended."""
        stream_id = self._running.get(conversation_id)
        launch = self._launches.get(stream_id) if stream_id is not None else None
        if stream_id is None or launch is None or stream_id in self._restarting:
            return False
        self._restarting[stream_id] = launch
        self.stop_stream(stream_id)
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
        old = self.db.turn_by_stream(stream_id)
        if old is None or old.conversation_id != conversation_id or old.status == "running":
            return None
        self._mark(conversation_id, MARKER_TURN_RESTARTED, stream_id,
                   {"stream_id": stream_id, "for": "retry"})
        # Retry and Edit-and-resend keep the turn's attachments (ADR 0028).
        new_stream = self.send(conversation_id, prompt, attachments=self.db.attachments(old.id))
        if new_stream is not None:
            self.observer.turn_restarted(conversation_id, stream_id, new_stream)
        return new_stream

    def _after_finish(self, conversation_id: int, stream_id: str) -> None:
        """One loop turn after the run's end: re-run a restarted turn, or deliver the queue."""
        restart = self._restarting.pop(stream_id, None)
        if self._closing or conversation_id in self._deleting or conversation_id in self._running:
            return
        if self.db.get_conversation(conversation_id) is None:
            return
        if restart is not None:
            new_stream = self._launch(restart)
            self._mark(conversation_id, MARKER_TURN_RESTARTED, stream_id,
                       {"stream_id": stream_id, "restarted_as": new_stream})
            self.observer.turn_restarted(conversation_id, stream_id, new_stream)
            return
        self._deliver(conversation_id)

    def stop_all(self) -> list[str]:
        running = list(self._running.items())
        aborted = self.gate.stop_all([stream_id for _conversation_id, stream_id in running],
                                     self.registry.abort_all)
        for conversation_id, stream_id in running:  # recorded after the stop went out
            if stream_id in aborted and self.store is not None:
                self._mark(conversation_id, MARKER_STOP_REQUESTED, stream_id)
        return aborted

    async def shutdown(self) -> None:
        """Stop every run and wait until their trees are gone; end the other tasks."""
        self._closing = True  # no restart or queued delivery starts a run now
        self.pause_queues_at_quit()  # shown again, paused, at the next start
        kept = self.let_kept_go()  # left running on their host (ADR 0032's Quit)
        # (a run finishing by itself keeps its tail)
        self.gate.stop_all([s for s in self._running.values() if s not in kept],
                           self.registry.abort_all)  # no abort reaches a run let go
        await self.registry.abort_all_and_wait()
        if self.keepers is not None:
            await self.keepers.close_all()  # the chats' kept agents, trees gone
        # The run tasks end right after their Done; detection and deletions are cancelled.
        await self.tasks.wait(timeout=2.0)
        await self.tasks.cancel_all()
