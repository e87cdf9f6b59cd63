"""The scrolling transcript of one conversation: a window of its turns, and its frame timer.

Only a window of a few pages of turns exists as widgets, whatever the length of the chat: the
view asks for the page before (or after) its window when the user scrolls near an end
(``page_requested``), and releases the turns at the far end once it holds more than
``MAX_LIVE_TURNS``. The store keeps everything (tolaria/core/store/pages.py). While turns above
the viewport are added, grow or go away, the view stays anchored on the turn under its top edge
(as browsers do), so nothing jumps; at the bottom it stays at the bottom as text streams in.

All updates of a transcript go through one single-shot 16 ms timer: events are queued on their
turn, and each tick applies as much as fits in a small time budget. So at most ~60 renders a
second happen whatever the agent prints, and the event loop is never held for long.

A page of stored turns loaded while scrolling is built one turn per tick, and the turns it
pushes out of the window are released one per tick (ADR 0037): a new turn costs its widgets,
then their first show (style polish, layout) in the events that follow, and a released one its
destruction; a whole page of either at once held the loop for 100 ms and more.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from tolaria.core.events import Done, Event
from tolaria.core.permissions import PermissionRequest
from tolaria.core.store.db import Turn
from tolaria.core.store.pages import PAGE_AROUND, PAGE_LATEST, PAGE_NEWER, PAGE_OLDER, TurnPage
from tolaria.ui import theme
from tolaria.ui.transcript.cards.style import follow_palette, retone, scrollbar_css, set_tone
from tolaria.ui.transcript.turn_view import STATUS_RUNNING, Ending, TurnView

FRAME_MS = 16
#: Seconds of work per tick for the visible transcript, and for hidden ones (which only need to
#: keep their queues short until they are shown).
VISIBLE_BUDGET_S = 0.003
HIDDEN_BUDGET_S = 0.002
#: ... and while only stored turns are being rendered (nothing streams): a bigger share, so a
#: restored chat settles sooner; input still gets half of every frame.
RESTORE_BUDGET_S = 0.008
_STICKY_SLACK = 24
#: Turn widgets kept at most (about three pages); beyond, the far end is released.
MAX_LIVE_TURNS = 30
#: Stored turns built, and held turns released, per tick while scrolling loads a page.
BUILDS_PER_TICK = 1


class TranscriptView(QScrollArea):
    #: The user answered a permission question of one of its turns: stream id, key, option id.
    permission_answer_requested = Signal(str, str, str)
    #: Run a failed or stopped turn's prompt again: stream id.
    retry_requested = Signal(str)
    #: Edit a turn's prompt and send it again: stream id.
    edit_requested = Signal(str)
    #: More stored turns are wanted: page kind (tolaria/core/store/pages.py), turn id it is
    #: relative to (0 for the latest page).
    page_requested = Signal(str, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setAccessibleName("Transcript")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        content = QWidget(self)
        content.setObjectName("transcriptContent")
        # The transcript sits on the base colour (white in light themes), like a document.
        content.setBackgroundRole(QPalette.ColorRole.Base)
        content.setAutoFillBackground(True)
        self._layout = QVBoxLayout(content)
        self._layout.setContentsMargins(20, 12, 20, 12)
        self._layout.setSpacing(theme.SPACING)
        self._placeholder = QLabel(
            "Ask the agent something.\n\nEnter sends · Shift+Enter adds a line · "
            "Esc stops the running turn", content)
        self._placeholder.setObjectName("transcriptPlaceholder")
        self._placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._layout.addWidget(self._placeholder, 1)
        self._layout.addStretch(0)
        self.setWidget(content)
        #: The turns held, in display order (oldest first), and by stream id.
        self._order: list[TurnView] = []
        self._turns: dict[str, TurnView] = {}
        self._busy: dict[str, TurnView] = {}
        #: Stored turns exist before / after the window (loaded on scroll).
        self.has_older = False
        self.has_newer = False
        self._waiting: str | None = None
        #: Stored turns of a page still to be built (one or a few per frame), and where.
        self._to_build: deque[tuple[Turn, list[Event], str]] = deque()
        self._build_at_top = False
        #: Turns beyond ``MAX_LIVE_TURNS`` are to be released, from this end (True: the bottom),
        #: one per tick (None: nothing to release).
        self._releasing: bool | None = None
        self._restarted: set[str] = set()
        #: Messages steered into a turn, by stream id: (marker id, text), shown when it is built.
        self._steered: dict[str, list[tuple[int, str]]] = {}
        #: Open permission questions of live turns, by stream id and key: asked again whenever
        #: the turn's view is built (a search jump and back), whatever its stored events say.
        self._questions: dict[str, dict[str, PermissionRequest]] = {}
        #: When the tool calls of live turns began (TurnView.tool_started), by stream id.
        self._tool_started: dict[str, dict[str, float]] = {}
        #: Text the chat's search is showing (highlighted in every held turn).
        self.needle = ""
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._page_check = QTimer(self)
        self._page_check.setSingleShot(True)
        self._page_check.setInterval(0)
        self._page_check.timeout.connect(self._on_page_check_timeout)
        self._anchor_again = QTimer(self)
        self._anchor_again.setSingleShot(True)
        self._anchor_again.setInterval(0)
        self._anchor_again.timeout.connect(self._restore_anchor)
        #: Once a second, running tools show their elapsed time.
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._on_clock_timeout)
        self._sticky = True
        self._anchor: tuple[TurnView, int] | None = None
        self._adjusting = False
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_scrollbar_range_changed)
        bar.valueChanged.connect(self._on_scrollbar_value_changed)
        self.restyle()
        follow_palette(self, self.restyle)

    def restyle(self) -> None:
        """Apply the current theme (at start and when the palette changes): one style sheet
        for every item, and the few colours painted outside it."""
        content = self.widget()
        if content is not None:
            retone(content)
        set_tone(self._placeholder, "muted")
        self.verticalScrollBar().setStyleSheet(scrollbar_css())
        for turn in self._order:
            turn.restyle()

    def _on_clock_timeout(self) -> None:
        running = [turn for turn in self._order if not turn.ended]
        for turn in running:
            for card in turn.tool_cards():
                if card.status in ("running", "pending"):
                    card.tick()
        if not running:
            self._clock.stop()

    def _on_turn_block_toggled(self, turn: QWidget) -> None:
        """A card opened or closed: what is at the top of the view stays there (no jump)."""
        self._take_anchor(self.verticalScrollBar().value())
        self._sticky = False

    # -- the window of turns ------------------------------------------------------------------
    def add_turn(self, prompt: str, agent_name: str, stream_id: str, *,
                 turn_id: int | None = None, started_at: float | None = None,
                 at_top: bool = False) -> TurnView:
        """A turn's view, at the bottom (or top of the window); the existing one if held."""
        known = self._turns.get(stream_id)
        if known is not None:
            return known
        self._placeholder.hide()
        turn = TurnView(prompt, agent_name, stream_id, self.widget(), turn_id=turn_id,
                        started_at=started_at)
        turn.permission_answer_requested.connect(self.permission_answer_requested)
        turn.retry_requested.connect(self.retry_requested)
        turn.edit_requested.connect(self.edit_requested)
        turn.block_toggled.connect(self._on_turn_block_toggled)
        if not self._clock.isActive():
            self._clock.start()
        if at_top:
            self._layout.insertWidget(0, turn)
            self._order.insert(0, turn)
        else:
            self._layout.insertWidget(self._layout.count() - 1, turn)
            self._order.append(turn)
            self._sticky = True
        self._turns[stream_id] = turn
        turn.tool_started = self._tool_started.setdefault(stream_id, turn.tool_started)
        if stream_id in self._restarted:
            turn.collapse_restarted()
        for key, text in self._steered.get(stream_id, ()):
            turn.add_steered(key, text)
        if self.needle:
            turn.set_needle(self.needle)
        return turn

    def add_stored(self, turn: Turn, events: Sequence[Event], agent_name: str, *,
                   at_top: bool = False) -> tuple[TurnView, Ending | None]:
        """A stored turn, its events queued (an unfinished one stays open for live events)."""
        known = self._turns.get(turn.stream_id)
        if known is not None:
            return known, known.ending
        view = self.add_turn(turn.prompt, agent_name, turn.stream_id, turn_id=turn.id,
                             started_at=turn.started_at, at_top=at_top)
        survivors: tuple = ()  # type: ignore[type-arg]
        done: Done | None = None
        for event in events:
            if isinstance(event, Done):
                survivors, done = event.survivors, event
            else:
                view.enqueue(event)
        for key, request in self._questions.get(turn.stream_id, {}).items():
            view.ask(key, request)  # (one card per key: a stored question is not doubled)
        ending = None
        if turn.status != STATUS_RUNNING:
            ending = Ending(turn.status, turn.duration_ms, survivors, turn.input_tokens,
                            turn.output_tokens, turn.cost_usd, turn.stop_reason,
                            done.limit if done is not None else None,
                            done.limit_value if done is not None else None)
            view.end(ending)
            self._tool_started.pop(turn.stream_id, None)  # nothing of it runs any more
        return view, ending

    def show_page(self, page: TurnPage, agent_names: dict[str, str]) -> list[Ending | None]:
        """Put a page of stored turns in the window; returns the endings of its turns."""
        self._waiting = None
        if page.kind in (PAGE_LATEST, PAGE_AROUND) and (
                self.has_newer or page.kind == PAGE_AROUND
                or (self._order and page.turns
                    and page.turns[0][0].stream_id not in self._turns)):
            self.clear()  # a jump: the new window replaces the old one
        at_top = page.kind == PAGE_OLDER
        # Nearest the view first: upwards for an older page, downwards otherwise.
        rows = [(turn, events, agent_names.get(turn.agent, turn.agent))
                for turn, events in (reversed(page.turns) if at_top else page.turns)]
        if page.kind in (PAGE_LATEST, PAGE_OLDER, PAGE_AROUND):
            self.has_older = page.has_older
        if page.kind in (PAGE_LATEST, PAGE_NEWER, PAGE_AROUND):
            self.has_newer = page.has_newer
            if not page.has_newer and page.kind == PAGE_NEWER:
                self._sticky = self._at_bottom()
        if page.kind in (PAGE_OLDER, PAGE_NEWER):
            # Scrolling: the turns are built a few per frame, so the loop never stalls on a
            # page (building a turn and its first layout cost milliseconds each).
            self._to_build.extend(rows)
            self._build_at_top = at_top
            self._releasing = None
            self._timer.start()
            return []
        made = [self.add_stored(turn, events, name) for turn, events, name in rows]
        # The newest turns are rendered first: that is what the user looks at.
        for view, _ending in sorted(made, key=lambda m: -self._order.index(m[0])):
            self.schedule(view)
        self._release(from_bottom=False)
        if page.focus_turn_id is not None:
            self.scroll_to_turn(page.focus_turn_id)
        self._page_check.start()
        return [ending for _view, ending in made]

    def _build_next(self) -> None:
        """Build one queued stored turn (a page being loaded while scrolling)."""
        turn, events, name = self._to_build.popleft()
        view, _ending = self.add_stored(turn, events, name, at_top=self._build_at_top)
        self.schedule(view)
        if not self._to_build:
            self._releasing = self._build_at_top  # the far end, one turn per tick

    def clear(self) -> None:
        """Release every turn (the window is about to show another part of the chat)."""
        self._to_build.clear()
        self._releasing = None
        for turn in list(self._order):
            self._drop(turn)
        self._anchor = None
        self.has_older = self.has_newer = False

    def _drop(self, turn: TurnView) -> None:
        self._order.remove(turn)
        self._turns.pop(turn.stream_id, None)
        self._busy.pop(turn.stream_id, None)
        if self._anchor is not None and self._anchor[0] is turn:
            self._anchor = None
        focused = QApplication.focusWidget()
        if focused is not None and turn.isAncestorOf(focused):
            # Else the focus goes on to the next turn's button, and the scroll area scrolls
            # to show it: the view would jump to where the released turn was.
            self.setFocus(Qt.FocusReason.OtherFocusReason)
        self._layout.removeWidget(turn)
        turn.hide()
        turn.deleteLater()

    def _release(self, *, from_bottom: bool, most: int | None = None) -> bool:
        """Give back turns beyond ``MAX_LIVE_TURNS`` at the end away from the user (``most``
        of them at most), as long as they are a screen or more away from what is shown; True
        if more are to be released."""
        self._layout.activate()  # positions as they are now
        top, screen = self.verticalScrollBar().value(), self.viewport().height()
        while len(self._order) > MAX_LIVE_TURNS:
            if most is not None and most <= 0:
                return True
            victim = self._order[-1] if from_bottom else self._order[0]
            if not victim.ended:
                return False  # a live turn stays (its events keep arriving)
            if (victim.y() < top + 2 * screen if from_bottom
                    else victim.y() + victim.height() > top - screen):
                return False  # near the viewport: the user may be reading it
            self._drop(victim)
            if most is not None:
                most -= 1
            if from_bottom:
                self.has_newer = True
                self._sticky = False
            else:
                self.has_older = True
        return False

    def mark_restarted(self, stream_id: str) -> None:
        """Remember an abandoned attempt: collapsed now, or when its page is loaded."""
        self._restarted.add(stream_id)
        view = self._turns.get(stream_id)
        if view is not None:
            view.collapse_restarted()

    def add_steered(self, stream_id: str, key: int, text: str) -> None:
        """A message sent into ``stream_id``'s turn while it ran: shown now, or when built."""
        held = self._steered.setdefault(stream_id, [])
        if key not in {k for k, _ in held}:
            held.append((key, text))
        view = self._turns.get(stream_id)
        if view is not None:
            view.add_steered(key, text)

    def hold_question(self, stream_id: str, key: str, request: PermissionRequest) -> None:
        """An open question of a live turn: shown now if its view is built, and every time
        the view is built again until ``release_question``."""
        self._questions.setdefault(stream_id, {})[key] = request
        view = self._turns.get(stream_id)
        if view is not None:
            view.ask(key, request)
            self.schedule(view)

    def release_question(self, stream_id: str, key: str) -> None:
        held = self._questions.get(stream_id, {})
        held.pop(key, None)
        if not held:
            self._questions.pop(stream_id, None)

    def release_questions(self, stream_id: str) -> None:
        self._questions.pop(stream_id, None)

    def turn_ended(self, stream_id: str) -> None:
        """A live turn ended: what was held for building its view again is let go."""
        self._tool_started.pop(stream_id, None)

    def add_late(self, stream_id: str, event: Event) -> bool:
        """A live event of a turn whose view is not built yet but whose stored page is queued
        to be (scrolling): it joins that page's events, so the view misses nothing."""
        for turn, events, _name in self._to_build:
            if turn.stream_id == stream_id:
                events.append(event)
                return True
        return False

    def set_needle(self, needle: str) -> None:
        self.needle = needle
        for view in self._order:
            view.set_needle(needle)

    def turn(self, stream_id: str) -> TurnView | None:
        return self._turns.get(stream_id)

    def turns(self) -> list[TurnView]:
        return list(self._order)

    def turn_by_id(self, turn_id: int) -> TurnView | None:
        return next((t for t in self._order if t.turn_id == turn_id), None)

    def scroll_to_turn(self, turn_id: int) -> bool:
        """Bring a held turn's top to the top of the viewport (and keep it there as it
        renders); False if it is not in the window."""
        view = self.turn_by_id(turn_id)
        if view is None:
            return False
        self._sticky = False
        self._anchor = (view, 0)
        self._restore_anchor()
        return True

    # -- the frame timer ------------------------------------------------------------------------
    def schedule(self, turn: TurnView) -> None:
        """``turn`` has queued work: apply it on the next frame."""
        self._busy.setdefault(turn.stream_id, turn)
        if not self._timer.isActive():
            self._timer.start()

    @property
    def busy(self) -> bool:
        return bool(self._busy or self._to_build or self._releasing is not None)

    def flush_all(self) -> None:
        """Apply everything queued now, whatever it costs (tests and screenshots)."""
        while self.busy:
            self._on_timer_timeout(budget=3600.0)

    def _on_timer_timeout(self, budget: float | None = None) -> None:
        if budget is None:
            if not self.isVisible():
                budget = HIDDEN_BUDGET_S
            elif all(turn.ended for turn in self._busy.values()):
                budget = RESTORE_BUDGET_S
            else:
                budget = VISIBLE_BUDGET_S
        deadline = time.perf_counter() + budget
        worked = False
        for _ in range(BUILDS_PER_TICK):  # (a whole page at once held the loop for 100+ ms)
            if not self._to_build:
                break
            self._build_next()
            worked = True
        if not worked and self._releasing is not None:
            if not self._release(from_bottom=self._releasing, most=BUILDS_PER_TICK):
                self._releasing = None
            worked = True
        for stream_id, turn in list(self._busy.items()):
            if worked and time.perf_counter() >= deadline:
                break  # (something was done this tick: the rest waits for the next)
            worked = True
            if turn.drain(deadline):
                break  # out of time; keep the order
            del self._busy[stream_id]
        if self.busy:
            self._timer.start()
        else:
            self._page_check.start()  # rendered: now the window's extent is known

    # -- scrolling ------------------------------------------------------------------------------
    def _at_bottom(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - _STICKY_SLACK

    def _restore_anchor(self) -> None:
        if self._anchor is None or (self._sticky and not self.has_newer):
            return
        view, offset = self._anchor
        self._adjusting = True
        try:
            self.verticalScrollBar().setValue(view.y() + offset)
        finally:
            self._adjusting = False

    def _on_scrollbar_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._sticky and not self.has_newer:
            self._adjusting = True
            try:
                self.verticalScrollBar().setValue(maximum)
            finally:
                self._adjusting = False
        else:
            self._restore_anchor()
            # The scroll bar may hear of the new size before the children are moved: again
            # once they are.
            self._anchor_again.start()
        self._page_check.start()

    def _on_scrollbar_value_changed(self, value: int) -> None:
        if not self._adjusting:
            self._sticky = self._at_bottom() and not self.has_newer
            self._take_anchor(value)
        self._page_check.start()

    def _take_anchor(self, value: int) -> None:
        """Remember the turn under the top edge and how far into it the view is."""
        self._anchor = None
        for view in self._order:
            if view.y() + view.height() > value:
                self._anchor = (view, value - view.y())
                break

    def _on_page_check_timeout(self) -> None:
        """Near an end of the window with more stored there: ask for the next page."""
        if self._waiting is not None or not self._order or self.busy:
            return  # (turns still rendering: their heights, so the ends, are not known yet)
        bar, reach = self.verticalScrollBar(), max(200, self.viewport().height())
        if self.has_older and bar.value() < reach:
            first = self._order[0].turn_id
            if first is not None:
                self._waiting = PAGE_OLDER
                self.page_requested.emit(PAGE_OLDER, first)
        elif self.has_newer and bar.maximum() - bar.value() < reach:
            last = self._order[-1].turn_id
            if last is not None:
                self._waiting = PAGE_NEWER
                self.page_requested.emit(PAGE_NEWER, last)
