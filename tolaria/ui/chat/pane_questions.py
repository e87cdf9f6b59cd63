"""A chat pane's open permission questions and its watchdog (split from chat_pane.py).

The running turn's open questions are kept by key whether or not the turn's view is built (a
search jumped away from it, its page is still loading): the transcript holds them until it is.
While one is open the watchdog says "waiting for your answer" instead of counting silence;
output, the last answer (unless the turn is being stopped) and a new turn count silence again.
A chat opened while its turn waits takes the open questions over from the stored page.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal

from tolaria.core.permissions import PermissionRequest
from tolaria.core.store.pages import TurnPage
from tolaria.ui.composer.notices import WatchdogNotice, open_questions
from tolaria.ui.transcript.turn_model import STATUS_RUNNING
from tolaria.ui.transcript.view import TranscriptView


class PaneQuestions(QObject):
    #: The open question's turn is out of the transcript's window: show the newest turns.
    latest_requested = Signal()

    def __init__(self, transcript: TranscriptView, watchdog: WatchdogNotice,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.transcript = transcript
        self.watchdog = watchdog
        #: The running turn's open permission questions by key.
        self.asking: dict[str, PermissionRequest] = {}
        #: The running turn is being stopped: its watchdog stays off.
        self._stopping = False
        #: Open questions of running turns as a loaded page stored them (a chat opened while
        #: its turn waits): taken over when the pane follows that run (``adopt``).
        self._stored_open: dict[str, dict[str, PermissionRequest]] = {}
        #: Tries left to bring an open question's card into view once it is built.
        self._focus_tries = 0
        self._focus_timer = QTimer(self)
        self._focus_timer.setSingleShot(True)
        self._focus_timer.setInterval(50)
        self._focus_timer.timeout.connect(self._on_focus_timer_timeout)

    # -- the running turn ----------------------------------------------------------------------
    def started(self) -> None:
        """A new turn runs: nothing asked yet, silence counted from now."""
        self.asking.clear()
        self._stopping = False
        self.watchdog.arm()

    def adopt(self, stream_id: str) -> None:
        """The pane follows ``stream_id``, started elsewhere: its stored open questions are
        asked here again."""
        self._stopping = False
        self.asking = dict(self._stored_open.pop(stream_id, {}))
        for key, request in self.asking.items():
            self.transcript.hold_question(stream_id, key, request)
        if self.asking:
            self.watchdog.wait_for_answer()
        else:
            self.watchdog.arm()

    def output(self) -> None:
        """The running turn said something: the silence starts again (not while it asks)."""
        if not self.asking:
            self.watchdog.arm()

    def asked(self, stream_id: str, key: str, request: PermissionRequest,
              running: bool) -> None:
        """A question of a turn (``running``: the pane's running turn). Never dropped: the
        transcript shows it when the turn's view is built."""
        self.transcript.hold_question(stream_id, key, request)
        if running:
            self.asking[key] = request
            self.watchdog.wait_for_answer()  # the agent waits for the user, not silent

    def settled(self, stream_id: str, key: str, running: bool) -> None:
        self.transcript.release_question(stream_id, key)
        if self.asking.pop(key, None) is not None and running and not self.asking \
                and not self._stopping:
            self.watchdog.arm()

    def stopping(self) -> None:
        """The running turn is being stopped (a question the stop cancels re-arms nothing)."""
        self._stopping = True
        self.watchdog.disarm()

    def finished(self, stream_id: str, running: bool) -> None:
        self.transcript.release_questions(stream_id)
        self._stored_open.pop(stream_id, None)
        if running:
            self.asking.clear()
            self.watchdog.disarm()

    def page_loaded(self, page: TurnPage) -> None:
        """Keep the open questions of the page's running turns (``adopt``)."""
        for turn, events in page.turns:
            if turn.status == STATUS_RUNNING:
                self._stored_open[turn.stream_id] = open_questions(events)

    # -- bringing a question into view ---------------------------------------------------------
    def show_open(self, running_stream: str | None) -> bool:
        """Bring the oldest open question into view and focus its answers; when its turn is
        out of the transcript's window the newest turns come back first (``latest_requested``)
        and the card gets the focus once built. False if no question is open."""
        if self._focus_open_card():
            return True
        if not self.asking or running_stream is None:
            return False
        if self.transcript.turn(running_stream) is None:
            self.latest_requested.emit()
        self._focus_tries = 60  # ~3 s for the page to be built
        self._focus_timer.start()
        return True

    def _focus_open_card(self) -> bool:
        for view in self.transcript.turns():
            for card in view.permission_cards():
                if card.focus_answers():
                    self.transcript.ensureWidgetVisible(card)
                    return True
        return False

    def _on_focus_timer_timeout(self) -> None:
        if self.asking and not self._focus_open_card() and self._focus_tries > 0:
            self._focus_tries -= 1
            self._focus_timer.start()
