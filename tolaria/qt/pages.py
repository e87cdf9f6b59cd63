"""Pages of stored turns and in-chat search, answered for the views.

A transcript holds a window of a chat's turns; when the user scrolls past its ends, or a search
jumps to a turn outside it, the view asks for a page (``MainWindow.page_requested``) and this
answers with the store's bounded queries (tolaria/core/store/pages.py) through the bridge.
"""

from __future__ import annotations

import logging
import sqlite3

from tolaria.core.store.db import Store
from tolaria.core.store.pages import PAGE_AROUND, PAGE_LATEST, PAGE_NEWER, PAGE_OLDER, TurnPage
from tolaria.qt.bridge import Bridge

log = logging.getLogger(__name__)


class PageLoader:
    def __init__(self, bridge: Bridge, store: Store) -> None:
        self.bridge = bridge
        self.store = store

    def load(self, conversation_id: int, kind: str, turn_id: int) -> None:
        """Answer ``page_requested`` with ``page_loaded`` (an empty page if the chat is gone)."""
        page: TurnPage
        try:
            if kind == PAGE_OLDER:
                page = self.store.turns_page(conversation_id, turn_id)
            elif kind == PAGE_NEWER:
                page = self.store.turns_after(conversation_id, turn_id)
            elif kind == PAGE_AROUND:
                page = self.store.turns_around(conversation_id, turn_id)
            elif kind == PAGE_LATEST:
                page = self.store.turns_page(conversation_id)
            else:
                raise ValueError(f"unknown page kind {kind!r}")
        except sqlite3.Error as exc:
            log.exception("could not read turns of conversation %s", conversation_id)
            self.bridge.problem_reported.emit(f"could not read the chat's earlier turns: {exc}")
            page = TurnPage(conversation_id, kind)
        self.bridge.page_loaded.emit(page)

    def search(self, conversation_id: int, text: str) -> None:
        """Answer ``search_requested`` with the matching turns, oldest first."""
        try:
            found = self.store.search_turns(conversation_id, text)
        except sqlite3.Error as exc:
            self.bridge.problem_reported.emit(f"could not search the chat: {exc}")
            found = []
        self.bridge.search_finished.emit(conversation_id, text, found)
