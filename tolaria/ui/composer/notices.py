"""Calm notices under a conversation's composer: the no-output watchdog and "waiting for you".

Neither acts by itself. The watchdog only offers "Restart turn?" when a running turn has been
silent for the configured time (``[behaviour] watchdog_seconds``); the awaiting notice only says
that the agent ended its turn by asking or answering rather than acting, so the next message is
what moves the conversation on.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QLabel, QWidget

from tolaria.core.events import Event, PermissionAsked, PermissionSettled, TextDelta, ToolStart
from tolaria.core.permissions import PermissionRequest, request_of
from tolaria.ui import theme

STATUS_COMPLETED = "completed"
_TAIL = 400


class AwaitTracker:
    """Follows one turn's events: did it act (call a tool), and how does its text end?"""

    def __init__(self) -> None:
        self.tools = 0
        self.tail = ""

    def feed(self, event: Event) -> None:
        if isinstance(event, ToolStart):
            self.tools += 1
        elif isinstance(event, TextDelta):
            self.tail = (self.tail + event.text)[-_TAIL:]

    def feed_all(self, events: Iterable[Event]) -> AwaitTracker:
        for event in events:
            self.feed(event)
        return self

    def awaits_operator(self, status: str) -> bool:
        """A completed turn that called no tool, or whose last words are a question."""
        if status != STATUS_COMPLETED:
            return False
        return self.tools == 0 or self.tail.rstrip().endswith("?")


def open_questions(events: Iterable[Event]) -> dict[str, PermissionRequest]:
    """The permission questions a turn's stored events leave open (asked, not settled)."""
    found: dict[str, PermissionRequest] = {}
    for event in events:
        if isinstance(event, PermissionAsked):
            found[event.key] = request_of(event)
        elif isinstance(event, PermissionSettled):
            found.pop(event.key, None)
    return found


class AwaitingNotice(QLabel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("The agent is waiting for your reply.", parent)
        self.setObjectName("awaitingNotice")
        self.setAccessibleName("Waiting for your reply")
        theme.follow_color(self, theme.muted_text)
        self.hide()


def silence_text(seconds: float) -> str:
    """``15 s``, ``2 min 5 s``: how long the turn has been silent, as a person would say it."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s" if seconds >= 1 else f"{seconds:.1f} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


#: What the watchdog notice says while the running turn waits for the user's answer.
WAITING_TEXT = "Waiting for your answer: the agent asks before it runs a tool"
#: The same while ssh asks (a host key, a passphrase: ADR 0033).
SSH_WAITING_TEXT = "Waiting for your answer: ssh asks before it connects"


class WatchdogNotice(QLabel):
    """"No output for N s — Restart turn?" after ``seconds`` of silence from the running turn.

    Once shown it counts on, once a second, from the last output: it always says the real
    silence, never the threshold that made it appear. While a permission question of the turn
    is open the silence is the user's, not the agent's: the notice then says "Waiting for your
    answer" with a link to the question (``waiting``), and counts nothing."""

    #: The user clicked "Restart turn?" in the notice.
    restart_requested = Signal()
    #: The user clicked "Show the question" (the turn waits for an answer).
    question_requested = Signal()

    def __init__(self, seconds: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("watchdogNotice")
        self.seconds = seconds
        theme.follow_color(self, theme.muted_text)
        self.linkActivated.connect(self._on_link_activated)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(max(1, round(seconds * 1000)))
        self._timer.timeout.connect(self._on_timer_timeout)
        self._tick = QTimer(self)
        self._tick.setInterval(1000)
        self._tick.timeout.connect(self._show_silence)
        self._silent_since = time.monotonic()
        self._waiting = False
        self.hide()

    @property
    def armed(self) -> bool:
        return self._timer.isActive()

    def set_seconds(self, seconds: float) -> None:
        """A new threshold (Preferences); counted from the next output."""
        self.seconds = seconds
        self._timer.setInterval(max(1, round(seconds * 1000)))

    @property
    def waiting(self) -> bool:
        """The turn waits for the user's answer (``wait_for_answer``)."""
        return self._waiting

    def wait_for_answer(self, text: str = WAITING_TEXT) -> None:
        """A question is open: no silence is counted; the notice says so (``text``: who
        asks), with a link to it."""
        self._timer.stop()
        self._tick.stop()
        self._waiting = True
        self.setText(f'{text} — <a href="question">Show the question</a>')
        self.setAccessibleName(f"{text}. Show the question")
        self.show()

    def arm(self) -> None:
        """(Re)start counting silence from now; hides the notice (output arrived)."""
        self._waiting = False
        self.hide()
        self._tick.stop()
        self._silent_since = time.monotonic()
        self._timer.start()

    def disarm(self) -> None:
        self._waiting = False
        self._timer.stop()
        self._tick.stop()
        self.hide()

    def silence(self) -> float:
        """Seconds since the last output (or since the turn started)."""
        return time.monotonic() - self._silent_since

    def _on_timer_timeout(self) -> None:
        self._show_silence()
        self.show()
        self._tick.start()

    def _show_silence(self) -> None:
        shown = silence_text(self.silence())
        self.setText(f'No output for {shown} — <a href="restart">Restart turn?</a>')
        self.setAccessibleName(f"No output for {shown}. Restart turn?")

    def _on_link_activated(self, link: str) -> None:
        if link == "question":
            self.question_requested.emit()
        else:
            self.restart_requested.emit()
