"""Routing a run's events to the one pane that shows it (main window and fan-out view alike)."""

from __future__ import annotations

from collections.abc import Sequence

from tolaria.core.events import Done, Event
from tolaria.core.permissions import PermissionRequest
from tolaria.core.store.db import Marker
from tolaria.core.store.pages import TurnPage
from tolaria.ui.chat.chat_pane import ChatPane


class PaneRouting:
    """Mixin: ``_pane_of_stream`` maps a live stream id to its pane; late events find nothing.
    Stored transcripts go by conversation id (``_panes``)."""

    _pane_of_stream: dict[str, ChatPane]
    _panes: dict[int, ChatPane]
    _agent_names: dict[str, str]

    def on_history_loaded(self, conversation_id: int, history: TurnPage) -> None:
        """A conversation's newest stored turns (loading them twice adds nothing)."""
        pane = self._panes.get(conversation_id)
        if pane is not None:
            pane.load_history(history, self._agent_names)

    def on_markers_loaded(self, conversation_id: int, markers: Sequence[Marker]) -> None:
        pane = self._panes.get(conversation_id)
        if pane is not None:
            pane.load_markers(markers)

    def on_event(self, stream_id: str, event: Event) -> None:
        pane = self._pane_of_stream.get(stream_id)
        if pane is not None:
            pane.apply_event(stream_id, event)

    def on_permission_requested(self, stream_id: str, key: str,
                                request: PermissionRequest) -> None:
        pane = self._pane_of_stream.get(stream_id)
        if pane is not None:
            pane.permission_requested(stream_id, key, request)

    def on_permission_settled(self, stream_id: str, key: str, outcome: str) -> None:
        pane = self._pane_of_stream.get(stream_id)
        if pane is not None:
            pane.permission_settled(stream_id, key, outcome)

    def on_run_stopping(self, stream_id: str) -> None:
        pane = self._pane_of_stream.get(stream_id)
        if pane is not None:
            pane.run_stopping(stream_id)

    def on_run_finished(self, stream_id: str, done: Done) -> None:
        pane = self._pane_of_stream.pop(stream_id, None)
        if pane is not None:
            pane.run_finished(stream_id, done)
