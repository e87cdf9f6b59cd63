"""One conversation: its transcript, composer, Send/Stop button and status line.

A pane renders the facts of its own streams only (the chat stack routes them by stream id) and
emits intents; it never starts or stops anything itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from tolaria.core.events import Done, Event
from tolaria.core.store import Turn
from tolaria.ui.composer import Composer
from tolaria.ui.status_line import StatusLine
from tolaria.ui.transcript import TranscriptView
from tolaria.ui.turn_view import (
    STATUS_RUNNING,
    Ending,
    TurnView,
    format_duration,
    format_usage,
    status_from_stop_reason,
)


class ChatPane(QWidget):
    #: The user asked to send a prompt: conversation id, prompt.
    send_requested = Signal(int, str)
    #: The user asked to stop this conversation's running turn: conversation id.
    stop_requested = Signal(int)

    def __init__(self, conversation_id: int, agent_name: str, stop_hint: str = "Esc",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatPane")
        self.conversation_id = conversation_id
        self.running_stream: str | None = None
        self._agent_name = agent_name
        self._stop_hint = stop_hint
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 6)
        layout.setSpacing(6)
        self.transcript = TranscriptView(self)
        layout.addWidget(self.transcript, 1)
        row = QHBoxLayout()
        row.setContentsMargins(12, 0, 12, 0)
        self.composer = Composer(self)
        self.composer.submit_requested.connect(self._on_composer_submit_requested)
        row.addWidget(self.composer, 1)
        self.button = QPushButton(self)
        self.button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Expanding)
        self.button.setMinimumWidth(84)
        self.button.clicked.connect(self._on_button_clicked)
        row.addWidget(self.button)
        layout.addLayout(row)
        self.status_line = StatusLine(self)
        self.status_line.setContentsMargins(12, 0, 12, 0)
        layout.addWidget(self.status_line)
        self.setFocusProxy(self.composer)
        self._show_running(False)
        self.status_line.set_idle(agent_name)

    # -- intents ------------------------------------------------------------------------------
    def _on_composer_submit_requested(self) -> None:
        if self.running_stream is not None:
            return  # one turn at a time; Stop is the button's job while a turn runs
        prompt = self.composer.toPlainText()
        if prompt.strip():
            self.send_requested.emit(self.conversation_id, prompt)

    def _on_button_clicked(self) -> None:
        if self.running_stream is not None:
            self.stop_requested.emit(self.conversation_id)
        else:
            self._on_composer_submit_requested()

    def _show_running(self, running: bool) -> None:
        if running:
            self.button.setObjectName("stopButton")
            self.button.setText("Stop")
            self.button.setAccessibleName("Stop")
            self.button.setToolTip(f"Stop the running turn ({self._stop_hint})")
        else:
            self.button.setObjectName("sendButton")
            self.button.setText("Send")
            self.button.setAccessibleName("Send")
            self.button.setToolTip("Send the message (Enter)")

    def set_stop_hint(self, hint: str) -> None:
        self._stop_hint = hint
        self._show_running(self.running_stream is not None)

    def set_agent_name(self, name: str) -> None:
        self._agent_name = name
        self.status_line.set_idle(name)

    # -- facts --------------------------------------------------------------------------------
    def load_history(self, history: Sequence[tuple[Turn, Sequence[Event]]],
                     agent_names: dict[str, str]) -> None:
        """Rebuild the transcript of stored turns (applied progressively by the frame timer)."""
        last_summary = ""
        for turn, events in history:
            if self.transcript.turn(turn.stream_id) is not None:
                continue
            view = self.transcript.add_turn(turn.prompt, agent_names.get(turn.agent, turn.agent),
                                            turn.stream_id)
            survivors: tuple = ()  # type: ignore[type-arg]
            for event in events:
                if isinstance(event, Done):
                    survivors = event.survivors
                else:
                    view.enqueue(event)
            if turn.status != STATUS_RUNNING:
                ending = Ending(turn.status, turn.duration_ms, survivors, turn.input_tokens,
                                turn.output_tokens, turn.cost_usd)
                view.end(ending)
                last_summary = self._summary(ending)
            self.transcript.schedule(view)
        if last_summary:
            self.status_line.set_idle(self._agent_name, last_summary)

    def run_started(self, stream_id: str, turn: Turn, agent_name: str) -> None:
        self.running_stream = stream_id
        self.transcript.add_turn(turn.prompt, agent_name, stream_id)
        self.composer.clear()
        self._show_running(True)
        self.status_line.start(agent_name)

    def apply_event(self, stream_id: str, event: Event) -> None:
        view = self.transcript.turn(stream_id)
        if view is None:
            return
        view.enqueue(event)
        self.transcript.schedule(view)

    def run_stopping(self, stream_id: str) -> None:
        view = self.transcript.turn(stream_id)
        if view is not None:
            view.mark_stopping()
        if stream_id == self.running_stream:
            self.status_line.stopping()

    def run_finished(self, stream_id: str, done: Done) -> None:
        view = self.transcript.turn(stream_id)
        ending = Ending(status_from_stop_reason(done.stop_reason), done.duration_ms,
                        done.survivors)
        if view is not None:
            view.end(ending)
            self.transcript.schedule(view)
        if stream_id == self.running_stream:
            self.running_stream = None
            self._show_running(False)
            usage = view.usage if view is not None else None
            self.status_line.finish(self._summary(ending, usage.input_tokens if usage else None,
                                                  usage.output_tokens if usage else None,
                                                  usage.cost_usd if usage else None))

    @staticmethod
    def _summary(ending: Ending, input_tokens: int | None = None,
                 output_tokens: int | None = None, cost_usd: float | None = None) -> str:
        words = {"completed": "Completed", "cancelled": "Stopped", "failed": "Failed",
                 "interrupted": "Interrupted"}.get(ending.status, ending.status)
        parts = [words]
        if ending.duration_ms is not None:
            parts.append(format_duration(ending.duration_ms))
        usage = format_usage(
            ending.input_tokens if ending.input_tokens is not None else input_tokens,
            ending.output_tokens if ending.output_tokens is not None else output_tokens,
            ending.cost_usd if ending.cost_usd is not None else cost_usd)
        if usage:
            parts.append(usage)
        return " · ".join(parts)

    # -- inspection ---------------------------------------------------------------------------
    def turn_views(self) -> list[TurnView]:
        return self.transcript.turns()
