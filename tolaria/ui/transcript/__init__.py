"""The transcript of one conversation: a virtualized window of its turns (view.py), and the
in-chat search bar (search_bar.py)."""

from __future__ import annotations

from tolaria.ui.transcript.view import (
    FRAME_MS,
    HIDDEN_BUDGET_S,
    MAX_LIVE_TURNS,
    VISIBLE_BUDGET_S,
    TranscriptView,
)

__all__ = ["FRAME_MS", "HIDDEN_BUDGET_S", "MAX_LIVE_TURNS", "VISIBLE_BUDGET_S", "TranscriptView"]
