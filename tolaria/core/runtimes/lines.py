from __future__ import annotations

from tolaria.core.events import Event, TextDelta
from tolaria.core.runtimes.base import Runtime


class PlainLines(Runtime):
    """Each stdout line is text (Aider, Kiro, Hermes and other line-oriented CLIs)."""

    trusts_exit_code = True

    def feed(self, line: str) -> list[Event]:
        return [TextDelta(self.stream_id, text=line + "\n")]
