"""What each chat's composer held when the app last closed (issue 26 item 6).

One small JSON file in the data folder, rewritten whole and atomically (temp file, fsync,
rename): a crash leaves the old drafts, never half a file. An unreadable file is set aside as
``drafts.json.bad`` rather than overwritten, and the app starts with no drafts.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from tolaria.support.jsonfile import read_or_set_aside
from tolaria.support.tomlfile import write_atomic

log = logging.getLogger(__name__)

#: Characters kept of one draft (a pasted log is not worth a slow start).
MAX_DRAFT_CHARS = 200_000
FILE_NAME = "drafts.json"


def _parse(data: Any) -> dict[int, str]:
    return {int(k): str(v) for k, v in data["drafts"].items() if isinstance(v, str) and v}


class Drafts:
    """conversation id -> text; thread-safe (the window reads, a writer thread saves)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._drafts: dict[int, str] = self._read()

    def _read(self) -> dict[int, str]:
        return read_or_set_aside(self.path, "a drafts file", _parse, {})

    def get(self, conversation_id: int) -> str:
        with self._lock:
            return self._drafts.get(conversation_id, "")

    def set(self, conversation_id: int, text: str) -> bool:
        """Remember ``text`` (empty forgets the draft); True if that changed anything."""
        text = text[:MAX_DRAFT_CHARS] if text.strip() else ""
        with self._lock:
            if self._drafts.get(conversation_id, "") == text:
                return False
            if text:
                self._drafts[conversation_id] = text
            else:
                self._drafts.pop(conversation_id, None)
            return True

    def forget(self, conversation_id: int) -> bool:
        return self.set(conversation_id, "")

    def save(self) -> None:
        """Write the file (raises OSError when it cannot be)."""
        with self._lock:
            data = {"version": 1, "drafts": {str(k): v for k, v in sorted(self._drafts.items())}}
        write_atomic(self.path, json.dumps(data, ensure_ascii=False, indent=0) + "\n")
