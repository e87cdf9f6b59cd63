"""Operator control of in-flight turns: messages queued behind a running turn, and how a turn
was launched (so "Restart turn" can re-run it exactly).

No Qt: the turn engine (tolaria/chats/engine/) owns one ``MessageQueues`` and a ``Launch`` per
live stream. The queue lives in the store (tolaria/core/store/queue.py), each change committed at
once, so it survives a quit or a crash. What is delivered when a turn ends: the message chosen by "Send now" alone if
there is one, else nothing while the queue is paused, else every queued message as one prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tolaria.core.attachments.model import Attachment
from tolaria.core.store.db import Store
from tolaria.core.store.queue import (
    PAUSED_AFTER_CRASH,
    PAUSED_AT_QUIT,
    PAUSED_BY_USER,
    QueuedMessage,
    QueueState,
)

__all__ = ["Launch", "MessageQueues", "QueueChange", "QueueState", "QueuedMessage",
           "join_messages"]

#: ``QueueChange.action`` values.
MOVE, EDIT, SEND_NOW, PAUSE, RESUME = "move", "edit", "send_now", "pause", "resume"
#: Take the files off a queued message the chat's agent cannot take (issue 26).
DROP_FILES = "drop_files"


@dataclass(frozen=True)
class Launch:
    """Everything a turn was started with. A restart re-runs it unchanged: the same prompt, the
    same history (preamble or resumed session id), the same agent and working folder."""

    conversation_id: int
    prompt: str
    full_prompt: str
    resume_id: str | None
    agent: str
    cwd: str
    #: The files sent with the prompt (stored copies; ADR 0028): a restart or Retry sends them
    #: again.
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class QueueChange:
    """What the user did to a queue in the window: move a message by ``offset`` places, give it a
    new ``text``, send it now, or pause/resume the queue (``message_id`` unused)."""

    action: str
    message_id: int = 0
    text: str = ""
    offset: int = 0


def join_messages(messages: Sequence[QueuedMessage]) -> str:
    """One prompt from several queued messages, in the order they were typed."""
    return "\n\n".join(m.text for m in messages)


class MessageQueues:
    """Per conversation, the stored messages waiting for its running turn to end."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: conversation id -> the message "Send now" picked to go next, alone.
        self._next: dict[int, int] = {}

    def add(self, conversation_id: int, text: str,
            attachments: Sequence[Attachment] = ()) -> QueuedMessage | None:
        return self.store.queue_add(conversation_id, text, attachments)

    def remove(self, conversation_id: int, message_id: int) -> QueuedMessage | None:
        found = self.store.queue_remove(conversation_id, [message_id])
        return found[0] if found else None

    def edit(self, conversation_id: int, message_id: int, text: str) -> QueuedMessage | None:
        return self.store.queue_edit(conversation_id, message_id, text)

    def drop_files(self, conversation_id: int, message_id: int,
                   images_only: bool = True) -> QueuedMessage | None:
        return self.store.queue_drop_files(conversation_id, message_id, images_only)

    def move(self, conversation_id: int, message_id: int, offset: int) -> bool:
        ids = [m.id for m in self.get(conversation_id)]
        if message_id not in ids:
            return False
        return self.store.queue_move(conversation_id, message_id, ids.index(message_id) + offset)

    def get(self, conversation_id: int) -> list[QueuedMessage]:
        return self.store.queued(conversation_id)

    def state(self, conversation_id: int) -> QueueState:
        return self.store.queue_state(conversation_id)

    def set_paused(self, conversation_id: int, paused: bool, reason: str = PAUSED_BY_USER) -> None:
        self.store.set_queue_paused(conversation_id, paused, reason)

    def send_next(self, conversation_id: int, message_id: int) -> bool:
        """Make ``message_id`` the next delivery, alone (even from a paused queue)."""
        if message_id not in {m.id for m in self.get(conversation_id)}:
            return False
        self._next[conversation_id] = message_id
        return True

    def deliverable(self, conversation_id: int) -> list[QueuedMessage]:
        """What goes to the agent when nothing runs; removed by the turn that takes them
        (``Store.start_turn(delivering=...)``)."""
        queued = self.get(conversation_id)
        chosen = self._next.get(conversation_id)
        if chosen is not None:
            picked = [m for m in queued if m.id == chosen]
            if picked:
                return picked
            del self._next[conversation_id]  # removed meanwhile: the normal rule applies
        if self.state(conversation_id).paused:
            return []
        return queued

    def taken(self, conversation_id: int, messages: Sequence[QueuedMessage]) -> None:
        """These messages left the store's queue (``Store.start_turn(delivering=...)`` removed
        them with the turn they started): a "Send now" pick among them is done."""
        if self._next.get(conversation_id) in {m.id for m in messages}:
            del self._next[conversation_id]

    def forget(self, conversation_id: int) -> None:
        """The chat is gone (its rows went with it)."""
        self._next.pop(conversation_id, None)

    def pause_leftovers(self, reason: str) -> list[int]:
        """Pause every unpaused queue that still holds messages: at quit (``PAUSED_AT_QUIT``) and
        at start (left unpaused means the last run ended without a shutdown:
        ``PAUSED_AFTER_CRASH``). Nothing is then sent by surprise. Returns those chats."""
        assert reason in (PAUSED_AT_QUIT, PAUSED_AFTER_CRASH)
        paused = []
        for conversation_id in self.store.queued_conversations():
            if not self.state(conversation_id).paused:
                self.set_paused(conversation_id, True, reason)
                paused.append(conversation_id)
        self._next.clear()
        return paused
