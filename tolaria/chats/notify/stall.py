"""A stalled run: silent for N minutes, told once per silence.

Fed with the engine's facts as the window hears them (a run started, said something, asks a
permission question, ended) and asked on a timer which runs are due. A run that waits for the
user's answer is not stalled (it is the user who is silent); its silence counts again once the
question is answered. Each silence is numbered, so the notification book tells each one once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Run:
    conversation_id: int
    last: float
    asking: int = 0
    silences: int = 0
    told: bool = False


@dataclass(frozen=True)
class Stall:
    conversation_id: int
    stream_id: str
    #: Which silence of the run (1 for the first): the book's event identity.
    silence: int
    silent_s: float


class StallWatch:
    def __init__(self, after_s: float) -> None:
        self.after_s = after_s
        self._runs: dict[str, _Run] = {}

    def started(self, stream_id: str, conversation_id: int, now: float) -> None:
        self._runs[stream_id] = _Run(conversation_id, now)

    def output(self, stream_id: str, now: float) -> bool:
        """The run said something; True when it had been told stalled (it spoke again)."""
        run = self._runs.get(stream_id)
        if run is None:
            return False
        run.last = now
        was_told, run.told = run.told, False
        return was_told

    def asking(self, stream_id: str, now: float, open_question: bool) -> None:
        """A permission question of the run was asked (True) or settled (False)."""
        run = self._runs.get(stream_id)
        if run is None:
            return
        run.asking = max(0, run.asking + (1 if open_question else -1))
        run.last = now

    def ended(self, stream_id: str) -> None:
        self._runs.pop(stream_id, None)

    def due(self, now: float) -> list[Stall]:
        """The runs silent for ``after_s`` or more that were not told yet in this silence."""
        out = []
        for stream_id, run in self._runs.items():
            if run.told or run.asking or now - run.last < self.after_s:
                continue
            run.told = True
            run.silences += 1
            out.append(Stall(run.conversation_id, stream_id, run.silences, now - run.last))
        return out

    def next_due(self, now: float) -> float | None:
        """Seconds until the next run may be due (None: no run is counting)."""
        waits = [max(0.0, run.last + self.after_s - now) for run in self._runs.values()
                 if not run.told and not run.asking]
        return min(waits) if waits else None
