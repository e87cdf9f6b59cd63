"""What the window keeps of its own state across restarts (the sidebar's folded host groups).

One small JSON file in the data folder (``window.json``), written whole and atomically when the
state changes (a click: rare): a crash leaves the old file, never half of one. An unreadable file
is set aside as ``window.json.bad`` and the window starts unfolded. No store migration: this is
not the chats' data.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from tolaria.support.jsonfile import read_or_set_aside
from tolaria.support.tomlfile import write_atomic

log = logging.getLogger(__name__)

FILE_NAME = "window.json"
#: Hosts kept folded at most (a list that only grows must not grow without bound).
MAX_FOLDED = 200


def _parse(data: Any) -> dict[str, object]:
    if not isinstance(data, dict):
        raise TypeError("not an object")
    return data


class UiState:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._data: dict[str, object] = self._read()

    def _read(self) -> dict[str, object]:
        return read_or_set_aside(self.path, "a window state file", _parse, {})

    @property
    def folded_hosts(self) -> list[str]:
        hosts = self._data.get("folded_hosts")
        if not isinstance(hosts, list):
            return []
        return [h for h in hosts if isinstance(h, str) and h][:MAX_FOLDED]

    def set_folded_hosts(self, hosts: list[str]) -> None:
        hosts = sorted({h for h in hosts if h})[:MAX_FOLDED]
        if hosts == self.folded_hosts:
            return
        self._data["folded_hosts"] = hosts
        try:
            write_atomic(self.path, json.dumps(self._data, indent=1) + "\n")
        except OSError as exc:  # a full disk: the fold holds while the window runs
            log.warning("could not save %s: %s", self.path, exc)
