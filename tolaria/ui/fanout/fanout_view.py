"""A fan-out job shown side by side: one chat pane per agent, each with its own Stop, plus
"Stop all in job" and the job's status in the header. The columns start equal; Ctrl+W closes
the window (the job goes on; Run → Jobs reopens it, past jobs included).

A separate, non-modal window, so the main window keeps working while the agents answer. The view
renders the facts of its own conversations only (routed by conversation id, then stream id, like
the chat stack) and emits intents; it never starts or stops anything itself.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from tolaria.chats.fanout import JOB_RUNNING, FanOutJob
from tolaria.core.store.db import Turn
from tolaria.qt.bridge import Bridge
from tolaria.ui.chat.chat_pane import ChatPane
from tolaria.ui.chat.stream_routing import PaneRouting
from tolaria.ui.window.actions import CLOSE_WINDOW_SHORTCUT

_STATUS_WORDS = {"running": "Running", "completed": "Completed", "cancelled": "Stopped",
                 "failed": "Failed"}


class FanOutView(PaneRouting, QWidget):
    #: Stop one member's running turn: conversation id.
    stop_requested = Signal(int)
    #: Stop every running member of this job: job id.
    stop_job_requested = Signal(str)
    #: A member pane's composer sent a follow-up: conversation id, prompt.
    send_requested = Signal(int, str)
    #: A member pane queued a message behind its running turn: conversation id, text.
    queue_requested = Signal(int, str)
    #: A member pane took a queued message back: conversation id, message id.
    unqueue_requested = Signal(int, int)
    #: Reorder, edit, send now, pause or resume a queue: conversation id, QueueChange.
    queue_change_requested = Signal(int, object)
    #: A member pane asked to restart its running turn: conversation id.
    restart_requested = Signal(int)
    #: A member pane answered a permission question: stream id, question key, option id.
    permission_answer_requested = Signal(str, str, str)

    def __init__(self, job: FanOutJob, agent_names: dict[str, str], stop_hint: str = "Esc",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setObjectName("fanOutView")
        self.job = job
        self.status = JOB_RUNNING
        self._agent_names = dict(agent_names)
        self.setWindowTitle(f"Ask several agents — {' '.join(job.prompt.split())[:60]}")
        self.resize(1200, 700)
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.header = QLabel(self)
        self.header.setObjectName("fanOutStatus")
        self.header.setWordWrap(True)
        top.addWidget(self.header, 1)
        self.stop_job_button = QPushButton("Stop all in job", self)
        self.stop_job_button.setObjectName("stopJobButton")
        self.stop_job_button.setAccessibleName("Stop all in job")
        self.stop_job_button.setToolTip("Stop every agent of this job (other chats keep running)")
        self.stop_job_button.clicked.connect(self._on_stop_job_button_clicked)
        top.addWidget(self.stop_job_button)
        layout.addLayout(top)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setObjectName("fanOutPanes")
        self.splitter.setChildrenCollapsible(False)
        layout.addWidget(self.splitter, 1)
        self._panes: dict[int, ChatPane] = {}
        self._pane_of_stream: dict[str, ChatPane] = {}
        for member in job.members:
            pane = ChatPane(member.conversation_id, self._name(member.agent), stop_hint,
                            self.splitter)
            pane.stop_requested.connect(self.stop_requested)
            pane.send_requested.connect(self.send_requested)
            pane.queue_requested.connect(self.queue_requested)
            pane.unqueue_requested.connect(self.unqueue_requested)
            pane.queue_change_requested.connect(self.queue_change_requested)
            pane.restart_requested.connect(self.restart_requested)
            pane.permission_answer_requested.connect(self.permission_answer_requested)
            self.splitter.addWidget(pane)
            self.splitter.setStretchFactor(self.splitter.count() - 1, 1)
            self._panes[member.conversation_id] = pane
        self._equalized = False
        close = QAction("Close", self)
        close.setObjectName("closeFanOutAction")
        # ⌘W on macOS, Ctrl+W (and Ctrl+F4 on Windows) elsewhere.
        close.setShortcuts(QKeySequence.keyBindings(QKeySequence.StandardKey.Close)
                           or [QKeySequence(CLOSE_WINDOW_SHORTCUT)])
        close.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        close.triggered.connect(self.close)
        self.addAction(close)
        self.set_status(JOB_RUNNING)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._equalized:  # the first time only: a column the user resized stays so
            self._equalized = True
            self.equalize()

    def equalize(self) -> None:
        """Every agent's column the same width (a splitter otherwise follows size hints)."""
        count = self.splitter.count()
        if count:
            handles = self.splitter.handleWidth() * (count - 1)
            width = max(count, self.splitter.width() - handles)
            self.splitter.setSizes([width // count] * count)

    def _name(self, agent: str) -> str:
        return self._agent_names.get(agent, agent)

    def attach(self, bridge: Bridge) -> None:
        """Render the bridge's facts about this job's conversations."""
        bridge.run_started.connect(self.on_run_started)
        bridge.event_received.connect(self.on_event)
        bridge.run_stopping.connect(self.on_run_stopping)
        bridge.permission_requested.connect(self.on_permission_requested)
        bridge.permission_settled.connect(self.on_permission_settled)
        bridge.run_finished.connect(self.on_run_finished)
        bridge.job_changed.connect(self.on_job_changed)
        bridge.conversation_deleted.connect(self.on_conversation_deleted)
        bridge.history_loaded.connect(self.on_history_loaded)
        bridge.markers_loaded.connect(self.on_markers_loaded)

    # -- queries ------------------------------------------------------------------------------
    def panes(self) -> list[ChatPane]:
        return list(self._panes.values())

    def pane(self, conversation_id: int) -> ChatPane | None:
        return self._panes.get(conversation_id)

    def running_streams(self) -> set[str]:
        return set(self._pane_of_stream)

    # -- intents ------------------------------------------------------------------------------
    def _on_stop_job_button_clicked(self) -> None:
        self.stop_job_requested.emit(self.job.job_id)

    # -- facts --------------------------------------------------------------------------------
    def set_status(self, status: str) -> None:
        self.status = status
        agents = ", ".join(self._name(m.agent) for m in self.job.members)
        self.header.setText(f"<b>{_STATUS_WORDS.get(status, status)}</b> · "
                            f"{len(self.job.members)} agents: {agents}")
        self.header.setAccessibleName(f"Job {status}")
        self.stop_job_button.setEnabled(status == JOB_RUNNING)

    def on_job_changed(self, job_id: str, status: str) -> None:
        if job_id == self.job.job_id:
            self.set_status(status)

    def on_conversation_deleted(self, conversation_id: int) -> None:
        pane = self._panes.pop(conversation_id, None)
        if pane is None:
            return
        for stream_id, owner in list(self._pane_of_stream.items()):
            if owner is pane:
                del self._pane_of_stream[stream_id]
        pane.hide()
        pane.deleteLater()

    def on_run_started(self, stream_id: str, conversation_id: int, turn: Turn) -> None:
        pane = self._panes.get(conversation_id)
        if pane is None:
            return
        self._pane_of_stream[stream_id] = pane
        pane.run_started(stream_id, turn, self._name(turn.agent))
        # The member's first turn is the job's (later ones are follow-ups typed in its pane).
        members = tuple(replace(m, stream_id=stream_id)
                        if m.conversation_id == conversation_id and m.stream_id is None else m
                        for m in self.job.members)
        self.job = replace(self.job, members=members)

