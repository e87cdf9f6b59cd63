"""The engine's part for quitting with kept runs (ADR 0032, "Quit").

A running turn of a chat that keeps running on its host when disconnected is not stopped when
Tolaria quits: its link closes the connection without a stop, as a dropped one, so the
supervisor there keeps the run; the stored turn stays running with what it has said (no
``Done`` is stored: the gate forgets the stream) and the next start takes it back
(``reattach_kept``). Every other run is stopped as before.
"""

from __future__ import annotations

from tolaria.chats.engine.gate import StreamGate
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import Store
from tolaria.core.turns.request import RunRequest


def attaching(request: RunRequest) -> bool:
    """Whether the run takes a kept run back (``reattach_kept``): a stop before its link is
    spawned must still reach the run there, so the link is spawned all the same and the stop
    goes with the attach."""
    return request.target is not None and request.target.attach_offset is not None


class LeavingPart:
    """Mixed into ``TurnEngine``, which provides the store, the registry, the gate, the runs."""

    store: Store | None
    registry: ProcessRegistry
    gate: StreamGate
    _running: dict[int, str]
    _turn_ids: dict[str, int]
    _unfinished: set[str]

    def kept_at_quit(self) -> dict[str, str]:
        """The running turns a quit would leave running on their host: stream id -> host."""
        if self.store is None:  # nothing stored: nothing could take the run back
            return {}
        kept = {}
        for conversation_id, stream_id in self._running.items():
            conversation = self.store.get_conversation(conversation_id)
            if conversation is not None and conversation.host and conversation.keep_running \
                    and stream_id in self._turn_ids and self.registry.can_let_go(stream_id):
                kept[stream_id] = conversation.host
        return kept

    def let_kept_go(self) -> list[str]:
        """At quit: let the kept runs go (their links close without a stop); their stored
        turns stay running for the next start. Their stream ids."""
        gone = []
        for stream_id in self.kept_at_quit():
            if not self.registry.detach(stream_id):
                continue  # ending by itself, or not spawned yet: stopped with the others
            self.gate.forget(stream_id)  # what it said so far is stored; nothing after
            self._unfinished.discard(stream_id)  # no "interrupted" either
            gone.append(stream_id)
        return gone
