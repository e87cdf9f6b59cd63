"""Each chat's unsent draft, kept across restarts (issue 26 item 6; chats/drafts.py).

Typing changes the draft in memory at once; the file is written 0.6 s after the last change on
a writer thread (an fsync never stalls typing), and once more, on the window's thread, when the
app shuts down. A deleted chat's draft goes with it.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PySide6.QtCore import QObject, QTimer

from tolaria.chats.drafts import Drafts

log = logging.getLogger(__name__)
SAVE_DELAY_MS = 600


class DraftKeeper(QObject):
    def __init__(self, path: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.drafts = Drafts(path)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SAVE_DELAY_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tolaria-drafts")

    def draft(self, conversation_id: int) -> str:
        return self.drafts.get(conversation_id)

    def on_draft_changed(self, conversation_id: int, text: str) -> None:
        if self.drafts.set(conversation_id, text):
            self._timer.start()

    def on_conversation_deleted(self, conversation_id: int) -> None:
        if self.drafts.forget(conversation_id):
            self._timer.start()

    def _on_timer_timeout(self) -> None:
        self._writer.submit(self._save)

    def _save(self) -> None:
        try:
            self.drafts.save()
        except OSError as exc:  # a full disk: the drafts stay in memory, the next save retries
            log.warning("could not save the drafts: %s", exc)

    def close(self) -> None:
        """Write what is pending now and stop the writer."""
        pending = self._timer.isActive()
        self._timer.stop()
        self._writer.shutdown(wait=True)
        if pending:
            self._save()
