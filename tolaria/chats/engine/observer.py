"""What the turn engine tells its front end: facts, in the order they happened.

The window's observer (tolaria/qt/bridge.py, ``BridgeObserver``) turns each into the bridge's
signal of the same name; ``tolaria run``'s (tolaria/cli/main.py) prints the events and keeps the
final ``Done``. ``QuietObserver`` ignores everything, so an observer writes only what it shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from tolaria.core.events import Done, Event
from tolaria.core.permissions import PermissionCallback
from tolaria.core.store.db import Conversation, Turn
from tolaria.core.store.queue import QueueState


class TurnObserver(Protocol):
    def run_started(self, stream_id: str, conversation_id: int, turn: Turn) -> None:
        """A turn was stored and its run reserved (the agent is not started yet)."""

    def agent_starting(self, stream_id: str) -> None:
        """The checkpoint before the turn is over: the agent starts now (unless the turn was
        stopped meanwhile: then its ``Done`` follows at once)."""

    def event(self, event: Event) -> None:
        """An event of a live run, already stored (never a ``Done``)."""

    def run_stopping(self, stream_id: str) -> None:
        """A stop of this stream took; its remaining content is dropped."""

    def run_finished(self, stream_id: str, done: Done) -> None:
        """The run ended (its ``Done`` is stored); nothing of this stream follows."""

    def conversation_saved(self, conversation: Conversation) -> None: ...

    def conversation_deleted(self, conversation_id: int) -> None: ...

    def queue_changed(self, conversation_id: int, state: QueueState) -> None: ...

    def messages_delivered(self, conversation_id: int, stream_id: str,
                           message_ids: Sequence[int]) -> None: ...

    def turn_restarted(self, conversation_id: int, old_stream: str, new_stream: str) -> None: ...

    def turn_changes_changed(self, conversation_id: int, changes: list[Any]) -> None:
        """What a chat's turns changed in its git folder (list[TurnChanges])."""

    def problem_reported(self, message: str) -> None:
        """Something the user must read that belongs to no turn."""


class QuietObserver:
    """A ``TurnObserver`` that ignores every fact (subclass it and show what you need)."""

    def run_started(self, stream_id: str, conversation_id: int, turn: Turn) -> None:
        return None

    def agent_starting(self, stream_id: str) -> None:
        return None

    def event(self, event: Event) -> None:
        return None

    def run_stopping(self, stream_id: str) -> None:
        return None

    def run_finished(self, stream_id: str, done: Done) -> None:
        return None

    def conversation_saved(self, conversation: Conversation) -> None:
        return None

    def conversation_deleted(self, conversation_id: int) -> None:
        return None

    def queue_changed(self, conversation_id: int, state: QueueState) -> None:
        return None

    def messages_delivered(self, conversation_id: int, stream_id: str,
                           message_ids: Sequence[int]) -> None:
        return None

    def turn_restarted(self, conversation_id: int, old_stream: str, new_stream: str) -> None:
        return None

    def turn_changes_changed(self, conversation_id: int, changes: list[Any]) -> None:
        return None

    def problem_reported(self, message: str) -> None:
        return None


class PermissionDesk(Protocol):
    """Where a run's permission questions are asked (the window's PermissionBroker)."""

    def hook(self, conversation_id: int) -> PermissionCallback: ...

    def close_stream(self, stream_id: str) -> None: ...

    def forget(self, conversation_id: int) -> None: ...
