from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tolaria.core.events import Event, TextDelta, ThinkingDelta, ToolDone, ToolStart, Usage

#: Events that prove the model answered: they end a stretch of retries.
PROGRESS = (TextDelta, ThinkingDelta, ToolStart, ToolDone, Usage)
_RETRY_DETAIL = 200


@dataclass(frozen=True)
class Outcome:
    """How the protocol said the turn ended."""

    stop_reason: str
    error: str | None = None


class Runtime:
    """Base parser: subclasses override ``feed`` and may set ``_outcome``.

    Retries: some CLIs retry a failing model request for minutes, or for ever (Codex
    "Reconnecting...", Claude ``system/api_retry``, Gemini's "Retrying with backoff" on stderr).
    A dialect that recognises such a line calls ``mark_retrying``; ``retrying`` then holds what
    the agent said until an event that proves progress (``PROGRESS``) clears it. The runner
    watches ``retrying`` after every line and cuts the run off when it lasts too long.
    """

    #: A line-oriented protocol has no final event: a clean exit code means the turn ended well.
    trusts_exit_code = False

    def __init__(self, stream_id: str, agent: str) -> None:
        self.stream_id = stream_id
        self.agent = agent
        self._outcome: Outcome | None = None
        #: What the agent said about its current retries, or None while it is not retrying.
        self.retrying: str | None = None
        #: The agent's environment beyond Tolaria's own (its manifest's ``[env]``, the run's),
        #: for a dialect that reads the agent's own files (Codex's session file: CODEX_HOME).
        self.agent_env: Mapping[str, str] = {}

    def feed(self, line: str) -> list[Event]:
        raise NotImplementedError

    def feed_stderr(self, line: str) -> None:
        """Look at one stderr line (some CLIs report their retries only there)."""

    def finish(self) -> list[Event]:
        """Events still held back when stdout ends (called once, before the outcome is read)."""
        return []

    def outcome(self) -> Outcome | None:
        return self._outcome

    # -- retries -------------------------------------------------------------------------------
    def mark_retrying(self, detail: str) -> None:
        detail = " ".join(detail.split())
        self.retrying = detail if len(detail) <= _RETRY_DETAIL else detail[:_RETRY_DETAIL] + "..."

    def note_progress(self, events: list[Event]) -> None:
        if self.retrying is not None and any(isinstance(e, PROGRESS) for e in events):
            self.retrying = None
