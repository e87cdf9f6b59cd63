from __future__ import annotations

from dataclasses import dataclass

from tolaria.core.events import Event


@dataclass(frozen=True)
class Outcome:
    """How the protocol said the turn ended."""

    stop_reason: str
    error: str | None = None


class Runtime:
    """Base parser: subclasses override ``feed`` and may set ``_outcome``."""

    #: A line-oriented protocol has no final event: a clean exit code means the turn ended well.
    trusts_exit_code = False

    def __init__(self, stream_id: str, agent: str) -> None:
        self.stream_id = stream_id
        self.agent = agent
        self._outcome: Outcome | None = None

    def feed(self, line: str) -> list[Event]:
        raise NotImplementedError

    def finish(self) -> list[Event]:
        """Events still held back when stdout ends (called once, before the outcome is read)."""
        return []

    def outcome(self) -> Outcome | None:
        return self._outcome
