"""Operator control of in-flight turns: messages queued behind a running turn, and how a turn
was launched (so "Restart turn" can re-run it exactly).

Plain data, no Qt: the controller owns one ``MessageQueues`` and a ``Launch`` per live stream.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class QueuedMessage:
    """A message typed while a turn ran; it becomes (part of) the next turn's prompt."""

    id: int
    text: str


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


def join_messages(messages: list[QueuedMessage]) -> str:
    """One prompt from several queued messages, in the order they were typed."""
    return "\n\n".join(m.text for m in messages)


class MessageQueues:
    """Per conversation, the messages waiting for its running turn to end."""

    def __init__(self) -> None:
        self._queues: dict[int, list[QueuedMessage]] = {}
        self._ids = itertools.count(1)

    def add(self, conversation_id: int, text: str) -> QueuedMessage:
        message = QueuedMessage(next(self._ids), text)
        self._queues.setdefault(conversation_id, []).append(message)
        return message

    def remove(self, conversation_id: int, message_id: int) -> QueuedMessage | None:
        queue = self._queues.get(conversation_id, [])
        for i, message in enumerate(queue):
            if message.id == message_id:
                del queue[i]
                if not queue:
                    del self._queues[conversation_id]
                return message
        return None

    def get(self, conversation_id: int) -> list[QueuedMessage]:
        return list(self._queues.get(conversation_id, ()))

    def take(self, conversation_id: int) -> list[QueuedMessage]:
        return self._queues.pop(conversation_id, [])

    def restore(self, conversation_id: int, messages: list[QueuedMessage]) -> None:
        """Put taken messages back in front (their delivery did not happen)."""
        if messages:
            self._queues[conversation_id] = messages + self._queues.get(conversation_id, [])
