"""The main window: layout and wiring only.

It forwards the user's intents (``*_requested``) and routes the bridge's facts to the sidebar,
the header and the chat panes. Stop shortcuts act only when no popup, menu, completer or modal
dialog owns the keyboard.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from tolaria.chats.fanout import FanOutJob
from tolaria.config.settings import (
    DEFAULT_NEW_CHAT,
    DEFAULT_RESTART,
    DEFAULT_STOP,
    DEFAULT_STOP_ALL,
    Settings,
)
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import Done, Event
from tolaria.core.programs.discovery import Detection
from tolaria.core.store.db import Conversation, Turn
from tolaria.qt.bridge import Bridge
from tolaria.ui import theme
from tolaria.ui.cards.style import flat_button_css, follow_palette
from tolaria.ui.chat_pane import ChatPane
from tolaria.ui.chat_stack import ChatStack
from tolaria.ui.fanout_dialog import FanOutDialog, agents_of
from tolaria.ui.fanout_view import FanOutView
from tolaria.ui.header import ChatHeader
from tolaria.ui.notifier import BackgroundNotifier
from tolaria.ui.sidebar import Sidebar
from tolaria.ui.view_menu import ViewMenu


def parse_shortcut(text: str, default: str, name: str, problems: list[str]) -> QKeySequence:
    seq = QKeySequence(text)
    if seq.isEmpty() or not seq.toString():  # unknown key names parse to an empty text
        problems.append(f"shortcuts.{name} = {text!r} is not a key sequence Qt understands; "
                        f"using {default!r}")
        seq = QKeySequence(default)
    return seq


class MainWindow(QMainWindow):
    #: Create a conversation: agent id, working folder.
    new_chat_requested = Signal(str, str)
    #: A conversation's view was created and needs its stored transcript: id.
    open_requested = Signal(int)
    #: A transcript wants a page of stored turns: conversation id, page kind, turn id.
    page_requested = Signal(int, str, int)
    #: Find text in a chat's stored turns: conversation id, text.
    search_requested = Signal(int, str)
    #: The user picked a theme in the View menu (applied already; to be saved): name.
    theme_change_requested = Signal(str)
    #: Run a prompt in place of an ended turn (Retry, edit and resend): conversation id,
    #: stream id, prompt.
    retry_requested = Signal(int, str, str)
    #: Send a prompt: conversation id, prompt.
    send_requested = Signal(int, str)
    #: Stop a conversation's running turn: conversation id.
    stop_requested = Signal(int)
    #: Stop every running turn.
    stop_all_requested = Signal()
    #: Queue a message behind a conversation's running turn: conversation id, text.
    queue_requested = Signal(int, str)
    #: Take a queued message back before delivery: conversation id, message id.
    unqueue_requested = Signal(int, int)
    #: Reorder, edit, send now, pause or resume a queue: conversation id, QueueChange.
    queue_change_requested = Signal(int, object)
    #: Revert a file of a turn, or rewind to before it: conversation id, UndoRequest.
    undo_requested = Signal(int, object)
    #: Abandon a conversation's running turn and re-run its prompt: conversation id.
    restart_requested = Signal(int)
    #: Answer a permission question of a running turn: stream id, question key, option id.
    permission_answer_requested = Signal(str, str, str)
    #: Rename a conversation: id, title.
    rename_requested = Signal(int, str)
    #: Delete a conversation (stopping its run first): id.
    delete_requested = Signal(int)
    #: Use another agent in a conversation: id, agent id.
    agent_change_requested = Signal(int, str)
    #: Use another working folder in a conversation: id, path.
    cwd_change_requested = Signal(int, str)
    #: Send one prompt to several agents at once (a fan-out job): prompt, agent ids, folder.
    fan_out_requested = Signal(str, object, str)
    #: Stop every running member of a fan-out job: job id.
    stop_job_requested = Signal(str)
    #: Open the Preferences window.
    preferences_requested = Signal()
    #: Open the settings file in the user's editor: path.
    open_file_requested = Signal(object)
    #: The window was closed (after the user confirmed stopping the running turns).
    closed = Signal()

    def __init__(self, settings: Settings, problems: Sequence[str] = (), *,
                 default_agent: str = "demo", default_cwd: str | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.setWindowTitle("Tolaria")
        self.setWindowIcon(theme.app_icon())
        self.resize(1100, 720)
        self.default_agent = default_agent
        self.default_cwd = default_cwd or os.getcwd()
        self._conversations: dict[int, Conversation] = {}
        self._conversation_of_stream: dict[str, int] = {}
        self._want_new = 0
        self._quit_confirmed = False
        self._quit_box: QMessageBox | None = None
        self._bridge: Bridge | None = None
        self._stop_hint = ""
        self.settings = settings
        self._problem_file: Path | None = None
        #: job id -> its side-by-side view (fan-out jobs started in this session)
        self.fan_out_views: dict[str, FanOutView] = {}
        self.fan_out_dialog: FanOutDialog | None = None
        problems = list(problems)
        stop_key = parse_shortcut(settings.stop_shortcut, DEFAULT_STOP, "stop", problems)
        stop_all_key = parse_shortcut(settings.stop_all_shortcut, DEFAULT_STOP_ALL, "stop_all",
                                      problems)

        self.sidebar = Sidebar(self)
        self.header = ChatHeader(self)
        self._stop_hint = stop_key.toString(QKeySequence.SequenceFormat.NativeText)
        self.stack = ChatStack(stop_key.toString(QKeySequence.SequenceFormat.NativeText), self,
                               watchdog_seconds=settings.watchdog_seconds)
        right = QWidget(self)
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.header)
        column.addWidget(self.stack, 1)
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(self.sidebar)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([250, 850])
        splitter.setChildrenCollapsible(False)
        self.setCentralWidget(splitter)
        self._problems = QLabel(self)
        self._problems.setObjectName("settingsProblems")
        self._problems.setWordWrap(True)
        self._problems.setTextFormat(Qt.TextFormat.PlainText)  # file paths, keys, values
        self._problems.setStyleSheet(f"color: {theme.css(theme.warning_color())};")
        self.statusBar().addWidget(self._problems, 1)
        self._open_file = QPushButton("Open the settings file", self)
        self._open_file.setObjectName("openSettingsFileButton")
        self._open_file.setVisible(False)
        self._open_file.clicked.connect(self._on_open_file_clicked)
        self.statusBar().addPermanentWidget(self._open_file)
        self.show_problems(problems)
        self.notifier = BackgroundNotifier(self)

        new_key = parse_shortcut(settings.new_chat_shortcut, DEFAULT_NEW_CHAT, "new_chat",
                                 problems)
        self.new_action = self._action("&New chat", new_key, self._on_new_action_triggered)
        self.quit_action = self._action("&Quit", QKeySequence(QKeySequence.StandardKey.Quit),
                                        self.close)
        self.stop_action = self._action("&Stop", stop_key, self._on_stop_action_triggered)
        self.stop_all_action = self._action("Stop &all runs", stop_all_key,
                                            self._on_stop_all_action_triggered)
        self.restart_action = self._action("&Restart turn", QKeySequence(DEFAULT_RESTART),
                                           self._on_restart_action_triggered)
        self.fan_out_action = self._action("Ask several agents…", QKeySequence("Ctrl+Shift+N"),
                                           self._on_fan_out_action_triggered)
        file_menu = self.menuBar().addMenu("&File")
        file_menu.addAction(self.new_action)
        file_menu.addAction(self.sidebar.rename_action)
        file_menu.addAction(self.sidebar.delete_action)
        file_menu.addSeparator()
        self.preferences_action = self._action("&Preferences…", QKeySequence("Ctrl+,"),
                                               self.preferences_requested.emit)
        self.preferences_action.setMenuRole(QAction.MenuRole.PreferencesRole)
        file_menu.addAction(self.preferences_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        run_menu = self.menuBar().addMenu("&Run")
        run_menu.addAction(self.stop_action)
        run_menu.addAction(self.stop_all_action)
        run_menu.addAction(self.restart_action)
        run_menu.addSeparator()
        run_menu.addAction(self.fan_out_action)
        self._restyle_chrome()
        follow_palette(self, self._restyle_chrome)
        self.view_menu = ViewMenu(self)
        self.view_menu.theme_chosen.connect(self.theme_change_requested)
        self.view_menu.find_requested.connect(self._on_view_menu_find_requested)
        self.menuBar().insertMenu(run_menu.menuAction(), self.view_menu)
        self.addAction(self.view_menu.find_action)  # Ctrl+F wherever the focus is
        self.view_menu.set_current(settings.theme)

        self.show_problems(problems)
        self.stack.set_send_key(settings.send_shortcut)

        self.sidebar.new_chat_requested.connect(self._on_new_action_triggered)
        self.sidebar.open_requested.connect(self._on_sidebar_open_requested)
        self.sidebar.activate_requested.connect(self._on_sidebar_activate_requested)
        self.sidebar.rename_requested.connect(self.rename_requested)
        self.sidebar.delete_requested.connect(self.delete_requested)
        self.header.agent_change_requested.connect(self._on_header_agent_change_requested)
        self.header.cwd_change_requested.connect(self._on_header_cwd_change_requested)
        self.stack.send_requested.connect(self.send_requested)
        self.stack.stop_requested.connect(self.stop_requested)
        self.stack.open_requested.connect(self.open_requested)
        self.stack.queue_requested.connect(self.queue_requested)
        self.stack.unqueue_requested.connect(self.unqueue_requested)
        self.stack.queue_change_requested.connect(self.queue_change_requested)
        self.stack.undo_requested.connect(self.undo_requested)
        self.stack.restart_requested.connect(self.restart_requested)
        self.stack.permission_answer_requested.connect(self.permission_answer_requested)
        self.stack.page_requested.connect(self.page_requested)
        self.stack.search_requested.connect(self.search_requested)
        self.stack.retry_requested.connect(self.retry_requested)

    def _action(self, text: str, key: QKeySequence, slot: object) -> QAction:
        action = QAction(text, self)
        action.setShortcut(key)
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(slot)
        self.addAction(action)
        return action

    def attach(self, bridge: Bridge) -> None:
        """Render the bridge's facts."""
        self._bridge = bridge
        bridge.job_created.connect(self._on_bridge_job_created)
        bridge.conversation_saved.connect(self._on_bridge_conversation_saved)
        bridge.conversation_deleted.connect(self._on_bridge_conversation_deleted)
        bridge.history_loaded.connect(self.stack.on_history_loaded)
        bridge.page_loaded.connect(self.stack.on_page_loaded)
        bridge.search_finished.connect(self.stack.on_search_finished)
        bridge.run_started.connect(self._on_bridge_run_started)
        bridge.event_received.connect(self._on_bridge_event_received)
        bridge.run_stopping.connect(self.stack.on_run_stopping)
        bridge.permission_requested.connect(self.stack.on_permission_requested)
        bridge.permission_settled.connect(self.stack.on_permission_settled)
        bridge.run_finished.connect(self._on_bridge_run_finished)
        bridge.agents_detected.connect(self._on_bridge_agents_detected)
        bridge.problem_reported.connect(self._on_bridge_problem_reported)
        bridge.markers_loaded.connect(self.stack.on_markers_loaded)
        bridge.queue_changed.connect(self.stack.on_queue_changed)
        bridge.turn_changes_changed.connect(self.stack.on_turn_changes_changed)
        bridge.turn_restarted.connect(self.stack.on_turn_restarted)

    def set_manifests(self, manifests: Sequence[Manifest], disabled: Collection[str] = ()) -> None:
        """The agents Tolaria knows; disabled ones are left out of the picker."""
        self.header.agent_picker.set_manifests(manifests, hidden=disabled)
        self.stack.set_agent_names({m.id: m.name for m in manifests})
        if self.fan_out_dialog is not None:
            self.fan_out_dialog.set_agents(agents_of(self.header.agent_picker))

    def show_problems(self, problems: Sequence[str]) -> None:
        self._problems.setText("\n".join(f"⚠ {p}" for p in problems))
        self._problems.setVisible(bool(problems))
        self._open_file.setVisible(bool(problems) and self._problem_file is not None)

    def offer_to_open(self, file: Path) -> None:
        """The settings file has problems: a button next to them opens it."""
        self._problem_file = file
        self._open_file.setVisible(self._problems.isVisibleTo(self))

    def _on_open_file_clicked(self) -> None:
        if self._problem_file is not None:
            self.open_file_requested.emit(self._problem_file)

    def apply_settings(self, settings: Settings) -> list[str]:
        """Re-bind the shortcuts and take the behaviour settings at once (no restart needed)."""
        problems: list[str] = []
        stop_key = parse_shortcut(settings.stop_shortcut, DEFAULT_STOP, "stop", problems)
        self.stop_action.setShortcut(stop_key)
        self.stop_all_action.setShortcut(parse_shortcut(
            settings.stop_all_shortcut, DEFAULT_STOP_ALL, "stop_all", problems))
        self.new_action.setShortcut(parse_shortcut(
            settings.new_chat_shortcut, DEFAULT_NEW_CHAT, "new_chat", problems))
        self._stop_hint = stop_key.toString(QKeySequence.SequenceFormat.NativeText)
        self.stack.set_stop_hint(self._stop_hint)
        self.stack.set_send_key(settings.send_shortcut)
        self.stack.set_watchdog_seconds(settings.watchdog_seconds)
        if settings.theme != self.settings.theme:
            self.view_menu.set_current(settings.theme)
        self.settings = settings
        return problems

    def _restyle_chrome(self) -> None:
        """The buttons around the chat are flat (each its own small style sheet: one on the
        window would send every widget, the transcript's too, through the style-sheet style)."""
        for button in (self.sidebar.new_button, self.header.folder_button):
            button.setStyleSheet(flat_button_css())

    def _on_view_menu_find_requested(self) -> None:
        pane = self.stack.current_pane()
        if pane is not None:
            pane.search_bar.open()

    # -- queries --------------------------------------------------------------------------------
    def current_conversation_id(self) -> int | None:
        pane = self.stack.current_pane()
        return pane.conversation_id if pane is not None else None

    def current_pane(self) -> ChatPane | None:
        return self.stack.current_pane()

    def running_count(self) -> int:
        streams = self.stack.running_streams()
        for view in self.fan_out_views.values():
            streams |= view.running_streams()
        return len(streams)

    # -- intents ------------------------------------------------------------------------------
    def _on_new_action_triggered(self) -> None:
        current = self._conversations.get(self.current_conversation_id() or -1)
        agent = current.agent if current else self.default_agent
        cwd = (current.cwd if current else None) or self.default_cwd
        self._want_new += 1
        self.new_chat_requested.emit(agent, cwd)

    def _keyboard_is_free(self) -> bool:
        """No popup (menu, combo box list, completer) and no modal dialog owns the keys."""
        return (QApplication.activePopupWidget() is None
                and QApplication.activeModalWidget() is None)

    def _on_stop_action_triggered(self) -> None:
        if not self._keyboard_is_free():
            return
        pane = self.stack.current_pane()
        if pane is not None and pane.running_stream is not None:
            self.stop_requested.emit(pane.conversation_id)

    def _on_restart_action_triggered(self) -> None:
        if not self._keyboard_is_free():
            return
        pane = self.stack.current_pane()
        if pane is not None and pane.running_stream is not None:
            self.restart_requested.emit(pane.conversation_id)

    def _on_stop_all_action_triggered(self) -> None:
        if self._keyboard_is_free():
            self.stop_all_requested.emit()

    def _on_fan_out_action_triggered(self) -> None:
        if self.fan_out_dialog is None:
            self.fan_out_dialog = FanOutDialog(self)
            self.fan_out_dialog.fan_out_requested.connect(self._on_fan_out_dialog_requested)
        self.fan_out_dialog.set_agents(agents_of(self.header.agent_picker))
        self.fan_out_dialog.show()
        self.fan_out_dialog.raise_()
        self.fan_out_dialog.activateWindow()

    def _on_fan_out_dialog_requested(self, prompt: str, agents: list[str]) -> None:
        current = self._conversations.get(self.current_conversation_id() or -1)
        cwd = (current.cwd if current else None) or self.default_cwd
        self.fan_out_requested.emit(prompt, agents, cwd)

    def _on_sidebar_open_requested(self, conversation_id: int) -> None:
        conversation = self._conversations.get(conversation_id)
        if conversation is None:
            return
        self.stack.show_conversation(conversation)  # loads the stored transcript at once
        for stream_id, owner in list(self._conversation_of_stream.items()):
            if owner == conversation_id:  # e.g. a fan-out member still running
                self.stack.adopt_run(stream_id, conversation_id)
        self.header.show_conversation(conversation)
        self.setWindowTitle(f"{conversation.title} — Tolaria")

    def _on_sidebar_activate_requested(self, conversation_id: int) -> None:
        pane = self.stack.pane(conversation_id)
        if pane is not None:
            pane.composer.setFocus()

    def _on_header_agent_change_requested(self, agent: str) -> None:
        conversation_id = self.current_conversation_id()
        if conversation_id is not None:
            self.agent_change_requested.emit(conversation_id, agent)

    def _on_header_cwd_change_requested(self, path: str) -> None:
        conversation_id = self.current_conversation_id()
        if conversation_id is not None:
            self.cwd_change_requested.emit(conversation_id, path)

    # -- facts --------------------------------------------------------------------------------
    def open_conversation(self, conversation_id: int, focus: bool = True) -> None:
        self.sidebar.select(conversation_id)
        self._on_sidebar_open_requested(conversation_id)
        pane = self.stack.pane(conversation_id)
        if focus and pane is not None:
            pane.composer.setFocus()

    def _on_bridge_conversation_saved(self, conversation: Conversation) -> None:
        is_new = conversation.id not in self._conversations
        self._conversations[conversation.id] = conversation
        self.sidebar.conversation_saved(conversation)
        self.stack.conversation_changed(conversation)
        if is_new and self._want_new:
            self._want_new -= 1
            self.open_conversation(conversation.id)
        elif conversation.id == self.current_conversation_id():
            self.header.show_conversation(conversation)
            self.setWindowTitle(f"{conversation.title} — Tolaria")

    def _on_bridge_conversation_deleted(self, conversation_id: int) -> None:
        self._conversations.pop(conversation_id, None)
        self.stack.remove(conversation_id)
        self.sidebar.conversation_deleted(conversation_id)  # selects a neighbour, if any
        if not self._conversations:
            self._on_new_action_triggered()

    def _on_bridge_run_started(self, stream_id: str, conversation_id: int, turn: Turn) -> None:
        self._conversation_of_stream[stream_id] = conversation_id
        self.sidebar.set_running(conversation_id, True)
        self.stack.on_run_started(stream_id, conversation_id, turn)

    def _on_bridge_event_received(self, stream_id: str, event: Event) -> None:
        self.stack.on_event(stream_id, event)

    def _on_bridge_run_finished(self, stream_id: str, done: Done) -> None:
        conversation_id = self._conversation_of_stream.pop(stream_id, None)
        if conversation_id is not None:
            self.sidebar.set_running(conversation_id, False)
        self.stack.on_run_finished(stream_id, done)
        if conversation_id is not None and self.settings.notify_background:
            conversation = self._conversations.get(conversation_id)
            in_view = (conversation_id == self.current_conversation_id()
                       and self.isActiveWindow() and not self.isMinimized())
            if conversation is not None and not in_view:
                self.notifier.chat_finished(conversation.title, done.stop_reason)

    def _on_bridge_job_created(self, job: FanOutJob) -> None:
        names = {m.agent: self.stack.agent_name(m.agent) for m in job.members}
        view = FanOutView(job, names, self._stop_hint, self)
        view.stop_requested.connect(self.stop_requested)
        view.stop_job_requested.connect(self.stop_job_requested)
        view.send_requested.connect(self.send_requested)
        view.queue_requested.connect(self.queue_requested)
        view.unqueue_requested.connect(self.unqueue_requested)
        view.queue_change_requested.connect(self.queue_change_requested)
        view.restart_requested.connect(self.restart_requested)
        view.permission_answer_requested.connect(self.permission_answer_requested)
        if self._bridge is not None:
            view.attach(self._bridge)
        self.fan_out_views[job.job_id] = view
        view.show()

    def _on_bridge_agents_detected(self, detections: Sequence[Detection]) -> None:
        self.header.agent_picker.set_detections(detections)

    def _on_bridge_problem_reported(self, message: str) -> None:
        self.statusBar().showMessage(message, 10_000)

    # -- closing ------------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:
        running = self.running_count()
        if running and not self._quit_confirmed and self.settings.confirm_quit:
            event.ignore()
            self._ask_to_quit(running)
            return
        event.accept()
        self.closed.emit()

    def _ask_to_quit(self, running: int) -> None:
        if self._quit_box is not None:
            return
        chats = "1 chat is" if running == 1 else f"{running} chats are"
        box = QMessageBox(QMessageBox.Icon.Warning, "Quit Tolaria",
                          f"{chats} still running. Stop and quit?", parent=self)
        box.setObjectName("quitDialog")
        box.setInformativeText("Every running agent and the processes it started are stopped.")
        quit_button = box.addButton("Stop and Quit", QMessageBox.ButtonRole.AcceptRole)
        quit_button.setObjectName("quitConfirmButton")
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def on_finished(_result: int) -> None:
            self._quit_box = None
            if box.clickedButton() is quit_button:
                self._quit_confirmed = True
                self.close()

        box.finished.connect(on_finished)
        self._quit_box = box
        box.open()

    def force_close(self) -> None:
        """Close without asking (SIGINT/SIGTERM in the terminal): runs are stopped on the way out."""
        self._quit_confirmed = True
        self.close()
