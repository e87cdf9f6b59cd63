"""The engine's part for queued messages: queue, take back, edit, reorder, pause/resume,
"Send now", and delivery when a turn ends.

A message sent while a turn runs is stored (``MessageQueues``, tolaria/chats/inflight.py) and
becomes the next turn's prompt when the running one ends. "Send now" stops the running turn the
normal way (``stop``: the cancelled turn keeps its partial output) and sends that message alone
next; a paused queue is not delivered. Each action is a store marker (``message_queued``,
``message_unqueued``, ``messages_delivered``) and every change is announced with
``queue_changed`` carrying the conversation's ``QueueState``. At start, queues left unpaused by a
run that ended without shutting down (a crash) are paused; at quit, every queue is.

"Send now" never steers (writes the message into the running turn), not even on Claude's
stream-json input, which could take it: measured with the real Claude (ADR 0007), such a message
waits until the running tool ends (never, for a hung one) and, landing after the last tool call,
starts a second turn in the same process. Stopping is prompt on every agent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from tolaria.chats.attachments import agent_refusal
from tolaria.chats.engine.observer import TurnObserver
from tolaria.chats.engine.queue_hold import first_held
from tolaria.chats.inflight import (
    DROP_FILES,
    EDIT,
    MOVE,
    PAUSE,
    RESUME,
    SEND_NOW,
    MessageQueues,
    QueueChange,
    QueuedMessage,
    join_messages,
)
from tolaria.core.adapters.manifest import AdapterSet
from tolaria.core.attachments.model import Attachment
from tolaria.core.store.db import MARKER_MESSAGE_QUEUED, MARKER_MESSAGE_UNQUEUED, Store
from tolaria.core.store.markers import Marker
from tolaria.core.store.queue import PAUSED_AFTER_CRASH, PAUSED_AT_QUIT


class QueuePart:
    """Mixed into ``TurnEngine``, which provides the store, the observer and the runs."""

    observer: TurnObserver
    queues: MessageQueues | None
    adapters: AdapterSet | None
    store: Store | None
    _running: dict[int, str]
    _deleting: set[int]

    # The engine's own (engine.py, control.py):
    send: Callable[..., str | None]
    stop: Callable[[int], bool]
    _mark: Callable[..., Marker | None]

    @property
    def queue_store(self) -> MessageQueues:
        if self.queues is None:
            raise RuntimeError("this turn engine keeps no queues (tolaria run)")
        return self.queues

    def queue(self, conversation_id: int, text: str,
              attachments: Sequence[Attachment] = ()) -> QueuedMessage | None:
        """Queue ``text`` behind the running turn (sent at once if none runs and the queue is
        not paused), with ``attachments`` (stored copies: they go with it, in the agent's form,
        and survive a restart). Stored before this returns. An image the chat's agent cannot
        take is refused here, said to the user, and nothing is queued."""
        if not text.strip() or conversation_id in self._deleting:
            return None
        if attachments:
            problem = self._queue_refusal(conversation_id, attachments)
            if problem is not None:
                self.observer.problem_reported(problem)
                return None
        message = self.queue_store.add(conversation_id, text, attachments)
        if message is None:
            return None
        data: dict[str, object] = {"id": message.id, "text": text}
        if attachments:
            data["attachments"] = [a.name for a in attachments]
        self._mark(conversation_id, MARKER_MESSAGE_QUEUED, None, data)
        self.announce_queue(conversation_id)
        if conversation_id not in self._running:
            self._deliver(conversation_id)
        return message

    def _queue_refusal(self, conversation_id: int,
                       attachments: Sequence[Attachment]) -> str | None:
        conversation = self.store.get_conversation(conversation_id) if self.store else None
        manifest = (self.adapters.manifests.get(conversation.agent)
                    if self.adapters is not None and conversation is not None else None)
        if conversation is not None and conversation.host:
            return (f"Attachments do not work on another host yet: the agent on "
                    f"{conversation.host} cannot read this machine's files.")
        return agent_refusal(manifest, attachments) if manifest is not None else None

    def unqueue(self, conversation_id: int, message_id: int) -> QueuedMessage | None:
        """Take a queued message back before delivery (to remove or edit it)."""
        message = self.queue_store.remove(conversation_id, message_id)
        if message is not None:
            self._mark(conversation_id, MARKER_MESSAGE_UNQUEUED, None,
                       {"id": message.id, "text": message.text})
            self.announce_queue(conversation_id)
        return message

    def change_queue(self, conversation_id: int, change: object) -> bool:
        """Apply a ``QueueChange`` from the window; False when it no longer applies."""
        if not isinstance(change, QueueChange) or conversation_id in self._deleting:
            return False
        queues = self.queue_store
        done = False
        if change.action == MOVE:
            done = queues.move(conversation_id, change.message_id, change.offset)
        elif change.action == EDIT and change.text.strip():
            done = queues.edit(conversation_id, change.message_id, change.text) is not None
        elif change.action in (PAUSE, RESUME):
            queues.set_paused(conversation_id, change.action == PAUSE)
            done = True
        elif change.action == SEND_NOW:
            if self._send_now_held(conversation_id, change.message_id):
                return False  # it cannot go: the running turn is not stopped for nothing
            done = queues.send_next(conversation_id, change.message_id)
        elif change.action == DROP_FILES:
            conversation = self.store.get_conversation(conversation_id) if self.store else None
            done = queues.drop_files(conversation_id, change.message_id, images_only=not (
                conversation is not None and conversation.host)) is not None
        if done:
            self.announce_queue(conversation_id)
            if change.action == SEND_NOW and conversation_id in self._running:
                self.stop(conversation_id)  # the run's end then delivers the chosen message
            elif (change.action in (SEND_NOW, RESUME, DROP_FILES)
                  and conversation_id not in self._running):
                self._deliver(conversation_id)
        return done

    def restore_queues(self) -> list[int]:
        """At start: queues left unpaused by a run that ended without shutting down (a crash)
        are paused, so nothing is sent by surprise; the chats show them when opened."""
        if self.queues is None:
            return []
        return self.queues.pause_leftovers(PAUSED_AFTER_CRASH)

    def pause_queues_at_quit(self) -> None:
        if self.queues is not None:
            self.queues.pause_leftovers(PAUSED_AT_QUIT)

    def announce_queue(self, conversation_id: int) -> None:
        if self.queues is not None:
            state = self.queues.state(conversation_id)
            held = self._held(conversation_id, list(state.messages))
            if held is not None:
                state = dataclasses.replace(state, held=state.messages[held[0]].id,
                                            held_why=held[1])
            self.observer.queue_changed(conversation_id, state)

    def queue_target_changed(self, conversation_id: int) -> None:
        """The chat's agent or host changed: a queued message may now be held (its chip says
        why) or let go (delivered at once when nothing runs)."""
        if self.queues is None or not self.queues.get(conversation_id):
            return
        self.announce_queue(conversation_id)
        if conversation_id not in self._running:
            self._deliver(conversation_id)

    def _send_now_held(self, conversation_id: int, message_id: int) -> bool:
        """"Send now" of a message the chat's agent cannot take: said why, True."""
        queued = [m for m in self.queue_store.get(conversation_id) if m.id == message_id]
        held = self._held(conversation_id, queued)
        if held is not None:
            self.observer.problem_reported(held[1])
        return held is not None

    def _held(self, conversation_id: int,
              messages: Sequence[QueuedMessage]) -> tuple[int, str] | None:
        """The first of ``messages`` the chat's agent cannot take now (queue_hold.py)."""
        if not any(m.attachments for m in messages) or self.store is None:
            return None
        conversation = self.store.get_conversation(conversation_id)
        manifest = (self.adapters.manifests.get(conversation.agent)
                    if self.adapters is not None and conversation is not None else None)
        return first_held(conversation, manifest, messages)

    def _deliver(self, conversation_id: int) -> str | None:
        queues = self.queue_store
        messages = queues.deliverable(conversation_id)
        held = self._held(conversation_id, messages)
        if held is not None:  # the queue waits at it: what came before goes, nothing half
            messages = messages[:held[0]]
            if not messages:
                self.announce_queue(conversation_id)
        if not messages:
            return None
        # The turn is recorded, the messages leave the queue and the messages_delivered marker
        # is written in one store transaction (Store.start_turn): a crash in between cannot
        # show a sent message again, nor lose it. (The send may end at once, e.g. an unknown
        # agent: still delivered exactly once.)
        stream_id = self.send(conversation_id, join_messages(messages),
                              delivering=[m.id for m in messages],
                              attachments=[a for m in messages for a in m.attachments])
        if stream_id is None:
            return None
        queues.taken(conversation_id, messages)
        self.announce_queue(conversation_id)
        self.observer.messages_delivered(conversation_id, stream_id, [m.id for m in messages])
        return stream_id
