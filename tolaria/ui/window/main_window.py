"""The main window: layout and wiring only.

It forwards the user's intents (``*_requested``) and routes the bridge's facts to the sidebar,
the header and the chat panes. Stop shortcuts act only when no popup, menu, completer or modal
dialog owns the keyboard. The actions live in one registry (ui/window/actions.py) that the menus and
the command palette share; Stop and Restart are enabled only while the current chat runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from functools import partial
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from tolaria.chats.fanout import FanOutJob
from tolaria.chats.importing import ImportReport
from tolaria.config.settings import (
    DEFAULT_NEW_CHAT,
    DEFAULT_STOP,
    DEFAULT_STOP_ALL,
    Settings,
)
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import Done, Event
from tolaria.core.limits import RunLimits
from tolaria.core.programs.discovery import Detection
from tolaria.core.store.db import Conversation, Turn
from tolaria.qt.bridge import Bridge
from tolaria.ui import theme
from tolaria.ui.chat.chat_pane import ChatPane
from tolaria.ui.chat.chat_stack import ChatStack, local_folder
from tolaria.ui.chat.header import ChatHeader
from tolaria.ui.chat.ssh_question import SshQuestionRouter
from tolaria.ui.fanout.fanout_dialog import FanOutDialog
from tolaria.ui.fanout.fanout_view import FanOutView
from tolaria.ui.fanout.jobs import JobWindows, job_label
from tolaria.ui.sidebar.new_chat_host import folder_on, hosts_of_chats
from tolaria.ui.sidebar.sidebar import Sidebar
from tolaria.ui.transcript.cards.style import flat_button_css, follow_palette
from tolaria.ui.window import keymap
from tolaria.ui.window.export_dialog import ExportDialog
from tolaria.ui.window.header_intents import HeaderIntents
from tolaria.ui.window.import_report import ImportReportBar
from tolaria.ui.window.notifier import BackgroundNotifier
from tolaria.ui.window.quit_prompt import QuitPrompt
from tolaria.ui.window.slash_actions import run_slash_command
from tolaria.ui.window.store_notice import StoreNotice
from tolaria.ui.window.view_menu import ViewMenu


def parse_shortcut(text: str, default: str, name: str, problems: list[str]) -> QKeySequence:
    seq = QKeySequence(text)
    if seq.isEmpty() or not seq.toString():  # unknown key names parse to an empty text
        problems.append(f"shortcuts.{name} = {text!r} is not a key sequence Qt understands; "
                        f"using {default!r}")
        seq = QKeySequence(default)
    return seq


class MainWindow(HeaderIntents):
    #: Create a conversation: agent id, working folder ("" on a host: its home), host ("" for
    #: this computer).
    new_chat_requested = Signal(str, str, str)
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
    #: Check and store files for a chat's next message: conversation id, AttachIntent.
    attach_requested = Signal(int, object)
    #: Send a prompt with attachments: conversation id, prompt, tuple of Attachment.
    send_attached_requested = Signal(int, str, object)
    #: Queue a message behind a conversation's running turn: conversation id, text.
    queue_requested = Signal(int, str)
    #: Take a queued message back before delivery: conversation id, message id.
    unqueue_requested = Signal(int, int)
    #: Reorder, edit, send now, pause or resume a queue: conversation id, QueueChange.
    queue_change_requested = Signal(int, object)
    #: Revert a file of a turn, or rewind to before it (UndoRequest), or show, accept or revert
    #: a hunk of a file's diff (ReviewRequest): conversation id, request.
    undo_requested = Signal(int, object)
    #: Answer a permission question of a running turn: stream id, question key, option id.
    permission_answer_requested = Signal(str, str, str)
    #: Rename a conversation: id, title.
    rename_requested = Signal(int, str)
    #: Delete a conversation (stopping its run first): id.
    delete_requested = Signal(int)
    #: Remove a conversation's git worktree once it is deleted (asked just before): id.
    remove_worktree_requested = Signal(int)
    #: Send one prompt to several agents at once (a fan-out job): prompt, agent ids, folder
    #: ("" on a host: its home), the job's budget (RunLimits), host ("" this computer).
    fan_out_requested = Signal(str, object, str, object, str)
    #: Stop every running member of a fan-out job: job id.
    stop_job_requested = Signal(str)
    #: Open the settings file in the user's editor: path.
    open_file_requested = Signal(object)
    #: The window was closed (after the user confirmed stopping the running turns).
    closed = Signal()
    #: A chat is now the one shown (opened from the sidebar, a notification, a shortcut): id.
    conversation_shown = Signal(int)

    def __init__(self, settings: Settings, problems: Sequence[str] = (), *,
                 default_agent: str = "demo", default_cwd: str | None = None,
                 keys: keymap.Keymap | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.keys = keys or keymap.current()
        self.setObjectName("mainWindow")
        #: Questions waiting for the user in every chat (the title shows them).
        self._pending_questions = 0
        self.setWindowTitle("Tolaria")
        self.setWindowIcon(theme.app_icon())
        self.resize(1100, 720)
        self.default_agent = default_agent
        self.default_cwd = default_cwd or os.getcwd()
        self._conversations: dict[int, Conversation] = {}
        self.limit_defaults = RunLimits()
        self._conversation_of_stream: dict[str, int] = {}
        self._want_new = 0
        self._quit_confirmed = False
        #: Stream id -> host of each running turn a quit leaves running there (ADR 0032); the
        #: app sets it (the engine's ``kept_at_quit``).
        self.kept_at_quit: Callable[[], dict[str, str]] = dict
        self.quit_prompt = QuitPrompt(self, self.running_count, self._on_quit_prompt_confirmed,
                                      kept=lambda: [host for sid, host in self.kept_at_quit()
                                                    .items() if sid in self.stack.running_streams()])
        self._bridge: Bridge | None = None
        self._stop_hint = ""
        self.settings = settings
        self._problem_file: Path | None = None
        problems = list(problems)
        stop_key = parse_shortcut(settings.stop_shortcut, DEFAULT_STOP, "stop", problems)
        stop_all_key = parse_shortcut(settings.stop_all_shortcut, DEFAULT_STOP_ALL, "stop_all",
                                      problems)

        self.sidebar = Sidebar(self)
        self.header = ChatHeader(self)
        self._stop_hint = stop_key.toString(QKeySequence.SequenceFormat.NativeText)
        self.stack = ChatStack(stop_key.toString(QKeySequence.SequenceFormat.NativeText), self,
                               watchdog_seconds=settings.watchdog_seconds)
        #: ssh's questions (host key, passphrase) to their chat's pane (ADR 0033).
        self.ssh_questions = SshQuestionRouter(
            self.stack.pane, lambda c: (self._conversations[c].host or "")
            if c in self._conversations else "", self)
        self.ssh_questions.question_shown.connect(self._on_ssh_questions_question_shown)
        right = QWidget(self)
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        self.store_notice = StoreNotice(right)  # chats cannot be saved: said over the chat
        column.addWidget(self.store_notice)
        column.addWidget(self.header)
        self.import_report = ImportReportBar(right)
        column.addWidget(self.import_report)
        self.import_report.cancel_requested.connect(self.import_cancel_requested)
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
        theme.follow_color(self._problems, theme.warning_color)
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
        self._build_actions(stop_key, stop_all_key, new_key)
        self.jobs = JobWindows(self, self.jobs_menu)
        self._restyle_chrome()
        follow_palette(self, self._restyle_chrome)
        self.view_menu = ViewMenu(self)
        self.view_menu.theme_chosen.connect(self.theme_change_requested)
        self.view_menu.find_requested.connect(self._on_view_menu_find_requested)
        self.menuBar().insertMenu(self.go_menu.menuAction(), self.view_menu)
        self.view_menu.addSeparator()
        self.view_menu.addAction(self.usage_action)  # View → Usage (the Usage page)
        self.addAction(self.view_menu.find_action)  # Ctrl+F wherever the focus is
        self.registry.adopt(self.view_menu.find_action)  # and in the command palette
        self.view_menu.set_current(settings.theme)
        self.pin_menu_roles()

        self.show_problems(problems)
        self.stack.set_send_key(settings.send_shortcut)

        self.sidebar.new_chat_requested.connect(self._on_new_action_triggered)
        self.sidebar.new_chat_on_host_requested.connect(self._on_sidebar_new_chat_on_host_requested)
        self.sidebar.new_host_button.hosts_of_chats = lambda: hosts_of_chats(
            self._conversations.values(), self.current_conversation_id())
        self.sidebar.open_requested.connect(self._on_sidebar_open_requested)
        self.sidebar.activate_requested.connect(self._on_sidebar_activate_requested)
        self.sidebar.rename_requested.connect(self.rename_requested)
        self.sidebar.remove_worktree_requested.connect(self.remove_worktree_requested)
        self.sidebar.delete_requested.connect(self.delete_requested)
        self.sidebar.confirm_closed.connect(self._on_sidebar_confirm_closed)
        self.header.agent_change_requested.connect(self._on_header_agent_change_requested)
        self.header.cwd_change_requested.connect(self._on_header_cwd_change_requested)
        self.header.host_change_requested.connect(self._on_header_host_change_requested)
        self.header.keep_running_change_requested.connect(
            self._on_header_keep_running_change_requested)
        self.header.host_agent_change_requested.connect(self._on_header_host_change_requested)
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
        self.stack.attach_requested.connect(self.attach_requested)
        self.stack.send_attached_requested.connect(self.send_attached_requested)
        self.stack.command_requested.connect(partial(run_slash_command, self))

        self._refresh_run_actions()

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
        bridge.run_stopping.connect(self.refresh_run_state)
        bridge.permission_requested.connect(self.stack.on_permission_requested)
        bridge.permission_settled.connect(self.stack.on_permission_settled)
        bridge.run_finished.connect(self._on_bridge_run_finished)
        bridge.agents_detected.connect(self._on_bridge_agents_detected)
        bridge.problem_reported.connect(self._on_bridge_problem_reported)
        bridge.markers_loaded.connect(self.stack.on_markers_loaded)
        bridge.queue_changed.connect(self.stack.on_queue_changed)
        bridge.turn_changes_changed.connect(self.stack.on_turn_changes_changed)
        bridge.file_review_loaded.connect(self.stack.on_file_review_loaded)
        bridge.sessions_imported.connect(self._on_bridge_sessions_imported)
        bridge.export_finished.connect(self._on_bridge_export_finished)
        bridge.attachment_settled.connect(self.stack.on_attachment_settled)
        bridge.worktree_changed.connect(self._on_bridge_worktree_changed)
        bridge.turn_restarted.connect(self.stack.on_turn_restarted)
        bridge.turn_restarted.connect(self.refresh_run_state)
        bridge.store_write_failed.connect(self.store_notice.show_failure)
        bridge.store_write_recovered.connect(self.store_notice.clear)
        bridge.ssh_question_asked.connect(self.ssh_questions.on_question_asked)
        bridge.ssh_question_closed.connect(self.ssh_questions.on_question_closed)

    def set_manifests(self, manifests: Sequence[Manifest], disabled: Collection[str] = ()) -> None:
        """The agents Tolaria knows; disabled ones are left out of the picker."""
        self.header.agent_picker.set_manifests(manifests, hidden=disabled)
        self.stack.set_agent_names({m.id: m.name for m in manifests},
                                   no_images=[m.id for m in manifests
                                              if not m.attachments.takes_images])
        self.jobs.refresh_agents()

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
        # The host menu's button looks like its neighbour, the folder button (its arrow is in
        # its text: the style's own indicator would overlap it).
        self.header.host_button.setStyleSheet(
            flat_button_css().replace("QPushButton", "QToolButton")
            + " QToolButton::menu-indicator { image: none; width: 0px; }")

    def _on_view_menu_find_requested(self) -> None:
        pane = self.stack.current_pane()
        if pane is not None:
            pane.search_bar.open()

    def set_pending_questions(self, count: int) -> None:
        """Questions waiting for the user's answer, in every chat: "(2) …" before the title."""
        self._pending_questions = count
        current = self._conversations.get(self.current_conversation_id() or -1)
        self._show_title(current.title if current is not None else "")

    def _show_title(self, title: str) -> None:
        count = self._pending_questions
        text = f"{title} — Tolaria" if title else "Tolaria"
        self.setWindowTitle(f"({count}) {text}" if count else text)

    # -- queries --------------------------------------------------------------------------------
    def current_conversation_id(self) -> int | None:
        pane = self.stack.current_pane()
        return pane.conversation_id if pane is not None else None

    def current_pane(self) -> ChatPane | None:
        return self.stack.current_pane()

    def running_count(self) -> int:
        return len(self.stack.running_streams() | self.jobs.running_streams())

    # -- intents ------------------------------------------------------------------------------
    def _on_new_action_triggered(self) -> None:
        """A new chat where the current one runs (a remote chat's context keeps its host)."""
        current = self._conversations.get(self.current_conversation_id() or -1)
        self._on_sidebar_new_chat_on_host_requested(current.host or "" if current else "")

    def _on_sidebar_new_chat_on_host_requested(self, host: str) -> None:
        self._want_new += 1
        agent, cwd = self._new_chat_defaults()
        current = self._conversations.get(self.current_conversation_id() or -1)
        self.new_chat_requested.emit(agent, folder_on(host, current, cwd), host)

    def _on_new_worktree_action_triggered(self) -> None:
        self._want_new += 1
        self.import_report.show_note("Making a git worktree for the new chat…")
        self.new_worktree_chat_requested.emit(*self._new_chat_defaults())

    def _new_chat_defaults(self) -> tuple[str, str]:
        """A new chat takes the current chat's agent and folder."""
        current = self._conversations.get(self.current_conversation_id() or -1)
        agent = current.agent if current else self.default_agent
        return agent, (local_folder(current) if current else None) or self.default_cwd

    def _on_sidebar_confirm_closed(self) -> None:
        pane = self.current_pane()
        if pane is not None:
            pane.composer.setFocus()

    def _on_fan_out_action_triggered(self) -> None:
        self.jobs.open_dialog()

    def _on_import_action_triggered(self) -> None:
        if not self.import_report.running:  # one import at a time
            self.import_report.show_running()
            self.import_requested.emit()

    def _on_import_from_requested(self, host: str) -> None:
        """File → Import sessions from: this computer ("") or a host (one import at a time)."""
        if not host:
            self._on_import_action_triggered()
        elif not self.import_report.running:
            self.import_report.show_looking(host)
            self.import_from_host_requested.emit(host)

    def _on_export_action_triggered(self) -> None:
        """A save dialog for the current chat (none open: nothing to export)."""
        chat = self._conversations.get(self.current_conversation_id() or -1)
        if chat is None:
            self.statusBar().showMessage("Open a chat to export it", 5_000)
            return
        self.export_dialog = ExportDialog(self, chat.id, chat.title, chat.cwd)
        self.export_dialog.chosen.connect(self.export_requested)
        self.export_dialog.open()

    def _on_bridge_export_finished(self, path: str, error: str) -> None:
        self.statusBar().showMessage(f"Chat exported to {path}" if path
                                     else f"The chat was not exported: {error}", 15_000)

    def _on_bridge_worktree_changed(self, conversation_id: int, path: str, note: str) -> None:
        self.sidebar.set_worktree(conversation_id, path)
        if note:
            self.import_report.show_note(note)

    def _on_bridge_sessions_imported(self, report: ImportReport | None, error: str) -> None:
        self.import_report.show_report(report, error, Path(os.path.expanduser("~")))

    def fan_out_here(self, prompt: str, agents: list[str],
                     budget: RunLimits | None = None, host: str = "") -> None:
        """Start a job in the current chat's folder (on ``host``: its folder when on that host,
        else the host's home)."""
        current = self._conversations.get(self.current_conversation_id() or -1)
        cwd = folder_on(host, current, (local_folder(current) if current else None)
                        or self.default_cwd)
        self.fan_out_requested.emit(prompt, agents, cwd, budget or RunLimits(), host)

    def _on_sidebar_open_requested(self, conversation_id: int) -> None:
        conversation = self._conversations.get(conversation_id)
        if conversation is None:
            return
        self.stack.show_conversation(conversation)  # loads the stored transcript at once
        for stream_id, owner in list(self._conversation_of_stream.items()):
            if owner == conversation_id:  # e.g. a fan-out member still running
                self.stack.adopt_run(stream_id, conversation_id)
        self.header.show_conversation(conversation)
        self._show_title(conversation.title)
        self._refresh_run_actions()
        self.conversation_shown.emit(conversation_id)

    def _on_sidebar_activate_requested(self, conversation_id: int) -> None:
        pane = self.stack.pane(conversation_id)
        if pane is not None:
            pane.composer.setFocus()

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
            self._show_title(conversation.title)

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
        self._refresh_run_actions()

    def _on_bridge_event_received(self, stream_id: str, event: Event) -> None:
        self.stack.on_event(stream_id, event)

    def _on_bridge_run_finished(self, stream_id: str, done: Done) -> None:
        conversation_id = self._conversation_of_stream.pop(stream_id, None)
        if conversation_id is not None:
            self.sidebar.set_running(conversation_id, False)
        self.stack.on_run_finished(stream_id, done)
        self._refresh_run_actions()
        if conversation_id is not None and self.settings.notify_background:
            conversation = self._conversations.get(conversation_id)
            in_view = (conversation_id == self.current_conversation_id()
                       and self.isActiveWindow() and not self.isMinimized())
            if conversation is not None and not in_view:
                self.notifier.chat_finished(conversation.title, done.stop_reason)

    def _on_bridge_job_created(self, job: FanOutJob) -> None:
        self.jobs.create_view(job).show()

    # -- fan-out jobs ---------------------------------------------------------------------------
    @property
    def fan_out_views(self) -> dict[str, FanOutView]:
        """job id -> its side-by-side window (jobs started or reopened in this session)."""
        return self.jobs.views

    @property
    def fan_out_dialog(self) -> FanOutDialog | None:
        return self.jobs.dialog

    def set_jobs(self, jobs: Sequence[tuple[FanOutJob, str]]) -> None:
        """Every stored job and its status (oldest first): the Jobs menu and sidebar groups."""
        self.jobs.set_jobs(jobs)
        self.sidebar.set_groups([(job_label(job, status), [m.conversation_id for m in job.members])
                                 for job, status in jobs])

    def stop_hint(self) -> str:
        return self._stop_hint

    def as_parent(self) -> QWidget:
        """The window as the parent of the job windows (tolaria/ui/fanout/jobs.py JobHost)."""
        return self

    def bridge(self) -> Bridge | None:
        return self._bridge

    def _on_bridge_agents_detected(self, detections: Sequence[Detection]) -> None:
        self.header.agent_picker.set_detections(detections)

    def _on_ssh_questions_question_shown(self, conversation_id: int) -> None:
        chat = self._conversations.get(conversation_id)  # not the chat shown: said, not opened
        if chat is not None and conversation_id != self.current_conversation_id():
            self.statusBar().showMessage(f"ssh asks in “{chat.title}”: open it to answer", 30_000)

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

    def _ask_to_quit(self, _running: int) -> None:
        self.quit_prompt.ask()

    def _on_quit_prompt_confirmed(self) -> None:
        self._quit_confirmed = True
        self.close()

    def force_close(self) -> None:
        """Close without asking (SIGINT/SIGTERM in the terminal): runs are stopped on the way out."""
        self._quit_confirmed = True
        self.close()
