"""The main window's keyboard side: its actions (one registry for the menus and the command
palette), the menus, chat navigation (Ctrl+Tab, Ctrl+1..9) and which run actions apply now.

The base class of :class:`tolaria.ui.window.main_window.MainWindow`, which provides the widgets and
the few queries declared here.
"""

from __future__ import annotations

import contextlib
import json
from functools import partial
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu

from tolaria.chats.usage import UsageReport
from tolaria.config.settings import DEFAULT_RESTART
from tolaria.core.limits import RunLimits
from tolaria.core.store.db import Conversation
from tolaria.ui.usage.usage_window import UsageWindow
from tolaria.ui.window import keymap
from tolaria.ui.window.about import AboutBox
from tolaria.ui.window.actions import (
    FAN_OUT_SHORTCUT,
    PALETTE_SHORTCUT,
    PALETTE_SHORTCUT_2,
    SEARCH_SHORTCUT,
    ActionRegistry,
    keyboard_is_free,
)
from tolaria.ui.window.chat_limits import ChatLimitsDialog
from tolaria.ui.window.host_import import ImportFromMenu
from tolaria.ui.window.palette import CommandPalette

if TYPE_CHECKING:
    from tolaria.ui.chat.chat_stack import ChatStack
    from tolaria.ui.sidebar.sidebar import Sidebar
    from tolaria.ui.window.quit_prompt import QuitPrompt


class WindowKeys(QMainWindow):
    """The base of the main window: the keyboard's intents and the actions that emit them."""

    #: Stop a conversation's running turn: conversation id.
    stop_requested = Signal(int)
    #: Stop every running turn.
    stop_all_requested = Signal()
    #: Abandon a conversation's running turn and re-run its prompt: conversation id.
    restart_requested = Signal(int)
    #: Open the Preferences window.
    preferences_requested = Signal()
    #: A new chat in a new git worktree of the current chat's repository: agent id, folder.
    new_worktree_chat_requested = Signal(str, str)
    #: Import the sessions the agent CLIs stored themselves (File → Import sessions from CLIs…).
    import_requested = Signal()
    #: Import the sessions stored on a host (File → Import sessions from → HOST): the host.
    import_from_host_requested = Signal(str)
    #: Cancel the running import from a host (its ssh client is killed).
    import_cancel_requested = Signal()
    #: Export a chat (File → Export…): conversation id, format (html, md, json), file path.
    export_requested = Signal(int, str, str)
    #: Keep a chat's own limits (Run → Chat limits…): conversation id, RunLimits.
    chat_limits_requested = Signal(int, object)
    #: The Usage page's figures (View → Usage): grouping (chat, agent, day), days (0: all).
    usage_requested = Signal(str, int)

    sidebar: Sidebar
    stack: ChatStack
    quit_prompt: QuitPrompt
    #: The platform's fixed keys (macOS: ⌃Tab for the next chat, ⌘⌫ to delete one).
    keys: keymap.Keymap
    _conversations: dict[int, Conversation]
    #: Preferences' limits, shown as the defaults in Run → Chat limits… (set by app/prefs).
    limit_defaults: RunLimits

    # -- provided by the main window ------------------------------------------------------------
    def current_conversation_id(self) -> int | None:
        raise NotImplementedError

    def open_conversation(self, conversation_id: int, focus: bool = True) -> None:
        raise NotImplementedError

    def running_count(self) -> int:
        raise NotImplementedError

    def _on_new_action_triggered(self) -> None:
        raise NotImplementedError

    def _on_fan_out_action_triggered(self) -> None:
        raise NotImplementedError

    def _on_new_worktree_action_triggered(self) -> None:
        raise NotImplementedError

    def _on_import_action_triggered(self) -> None:
        raise NotImplementedError

    def _on_import_from_requested(self, host: str) -> None:
        raise NotImplementedError

    def _on_export_action_triggered(self) -> None:
        raise NotImplementedError

    def _on_new_on_host_action(self) -> None:
        """The "▾" of New chat, opened from the menu or the palette (popup: no nested loop)."""
        button = self.sidebar.new_host_button
        button.menu().popup(button.mapToGlobal(button.rect().bottomLeft()))

    # -- actions and menus ----------------------------------------------------------------------

    def _build_actions(self, stop_key: QKeySequence, stop_all_key: QKeySequence,
                       new_key: QKeySequence) -> None:
        self.registry = ActionRegistry(self)
        add = self.registry.add
        self.new_action = add("&New chat", new_key, self._on_new_action_triggered)
        self.new_worktree_action = add("New chat in a git &worktree", None,
                                       self._on_new_worktree_action_triggered,
                                       name="newWorktreeChatAction")
        self.new_on_host_action = add("New chat on &host…", None, self._on_new_on_host_action,
                                      name="newChatOnHostAction")
        self.search_action = add("&Search chats", SEARCH_SHORTCUT, self.sidebar.focus_search,
                                 name="searchChatsAction")
        self.registry.adopt(self.sidebar.rename_action)
        self.registry.adopt(self.sidebar.delete_action)
        keys = self.keys
        self.sidebar.delete_action.setShortcuts(keys.sequences(keys.delete_chat))
        self.next_chat_action = add("Next chat", None, lambda: self._on_cycle_chat(1))
        self.next_chat_action.setShortcuts(keys.sequences(keys.next_chat))
        self.previous_chat_action = add("Previous chat", None, lambda: self._on_cycle_chat(-1))
        self.previous_chat_action.setShortcuts(keys.sequences(keys.previous_chat))
        self.stop_action = add("&Stop", stop_key, self._on_stop_action_triggered)
        self.stop_all_action = add("Stop &all runs", stop_all_key,
                                   self._on_stop_all_action_triggered)
        self.restart_action = add("&Restart turn", QKeySequence(DEFAULT_RESTART),
                                  self._on_restart_action_triggered)
        self.chat_limits_action = add("Chat &limits…", None, self._on_chat_limits_action_triggered,
                                      name="chatLimitsAction")
        self.fan_out_action = add("Ask several agents…", FAN_OUT_SHORTCUT,
                                  self._on_fan_out_action_triggered)
        self.import_action = add("&Import sessions from CLIs…", None,
                                 self._on_import_action_triggered, name="importSessionsAction")
        self.export_action = add("&Export chat…", None, self._on_export_action_triggered,
                                 name="exportChatAction")
        self.usage_action = add("&Usage", None, self._on_usage_action_triggered,
                                name="usageAction")
        self.usage_window: UsageWindow | None = None
        self.preferences_action = add("&Preferences…", QKeySequence("Ctrl+,"),
                                      self.preferences_requested.emit)
        # On macOS Qt moves these three into the application menu (Tolaria → Settings…,
        # About Tolaria, Quit Tolaria); elsewhere they stay where they are added.
        self.preferences_action.setMenuRole(QAction.MenuRole.PreferencesRole)
        self.quit_action = add("&Quit", None, self.close, name="quitAction")
        self.quit_action.setShortcuts(keymap.quit_keys())
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        self.about_action = add("&About Tolaria", None, self._on_about_action_triggered,
                                name="aboutAction")
        self.about_action.setMenuRole(QAction.MenuRole.AboutRole)
        self.palette_action = add("Command palette…", PALETTE_SHORTCUT,
                                  self._on_palette_action_triggered, in_palette=False)
        self.palette_action.setObjectName("paletteAction")
        self.palette_action.setShortcuts([QKeySequence(PALETTE_SHORTCUT),
                                          QKeySequence(PALETTE_SHORTCUT_2)])
        self.goto_actions = [add(f"Go to chat {n}", f"Ctrl+{n}",
                                 partial(self._on_goto_chat, n), in_palette=False)
                             for n in range(1, 10)]
        self.command_palette = CommandPalette(self)
        file_menu = self.menuBar().addMenu("&File")
        for action in (self.new_action, self.new_on_host_action, self.new_worktree_action,
                       self.search_action, self.sidebar.rename_action,
                       self.sidebar.delete_action):
            file_menu.addAction(action)
        file_menu.addSeparator()
        file_menu.addAction(self.import_action)
        self.import_from_menu = ImportFromMenu(self.sidebar.new_host_button.choices,
                                               self.sidebar.new_host_entry, self)
        self.import_from_menu.import_from_requested.connect(self._on_import_from_requested)
        file_menu.addMenu(self.import_from_menu)
        file_menu.addAction(self.export_action)
        file_menu.addSeparator()
        file_menu.addAction(self.preferences_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        run_menu = self.menuBar().addMenu("&Run")
        for action in (self.stop_action, self.stop_all_action, self.restart_action,
                       self.chat_limits_action):
            run_menu.addAction(action)
        run_menu.addSeparator()
        run_menu.addAction(self.fan_out_action)
        self.jobs_menu = run_menu.addMenu("&Jobs")
        self.jobs_menu.setObjectName("jobsMenu")
        self.go_menu = self.menuBar().addMenu("&Go")
        self.go_menu.addAction(self.palette_action)
        self.go_menu.addAction(self.next_chat_action)
        self.go_menu.addAction(self.previous_chat_action)
        self.help_menu = self.menuBar().addMenu("&Help")
        self.help_menu.addAction(self.about_action)

    def pin_menu_roles(self) -> None:
        """Every action in the menus but Preferences, About and Quit stays in its menu on
        macOS (``NoRole``): Qt's default role guesses from the text and would move "Settings",
        "Options", "About…" items into the application menu. Called once the menus are built
        (the Jobs menu, rebuilt later, sets its own)."""
        keep = {self.preferences_action, self.about_action, self.quit_action}
        menus = [m for a in self.menuBar().actions() if isinstance(m := a.menu(), QMenu)]
        while menus:
            for action in menus.pop().actions():
                if isinstance(sub := action.menu(), QMenu):
                    menus.append(sub)
                elif action not in keep:
                    action.setMenuRole(QAction.MenuRole.NoRole)

    def _on_about_action_triggered(self) -> None:
        """A small non-modal box (open(), not exec(): no nested loop under qasync)."""
        box = AboutBox(self)
        self.about_box = box
        box.open()

    def _on_usage_action_triggered(self) -> None:
        """The Usage page, made once and raised; it asks for fresh figures each time."""
        if self.usage_window is None:
            self.usage_window = UsageWindow(self)
            self.usage_window.report_requested.connect(self.usage_requested)
        self.usage_window.show()
        self.usage_window.raise_()
        self.usage_window.activateWindow()
        self.usage_window.request()

    def show_usage(self, report: UsageReport, names: dict[str, str]) -> None:
        """The figures the Usage page asked for (agent ids -> names for its labels)."""
        if self.usage_window is not None:
            self.usage_window.show_report(report, names)

    def _keyboard_is_free(self) -> bool:
        return keyboard_is_free()

    def _on_palette_action_triggered(self) -> None:
        if self._keyboard_is_free():
            self.command_palette.open_with(self.registry.actions())

    def _on_cycle_chat(self, step: int) -> None:
        """Ctrl+Tab / Ctrl+Shift+Tab: the next or previous chat in the sidebar, wrapping."""
        ids = self.sidebar.visible_ids()
        if not ids or not self._keyboard_is_free():
            return
        current = self.current_conversation_id()
        index = ids.index(current) if current in ids else -step
        self.open_conversation(ids[(index + step) % len(ids)])

    def _on_goto_chat(self, number: int) -> None:
        ids = self.sidebar.visible_ids()
        if len(ids) >= number and self._keyboard_is_free():
            self.open_conversation(ids[number - 1])

    def _running_here(self) -> int | None:
        """The current chat's id while its turn runs, else None."""
        pane = self.stack.current_pane()
        return (pane.conversation_id if pane is not None and pane.running_stream is not None
                else None)

    def _on_stop_action_triggered(self) -> None:
        running = self._running_here()
        if running is not None and self._keyboard_is_free():
            self.stop_requested.emit(running)

    def _on_restart_action_triggered(self) -> None:
        running = self._running_here()
        if running is not None and self._keyboard_is_free():
            self.restart_requested.emit(running)

    def _on_chat_limits_action_triggered(self) -> None:
        conversation_id = self.current_conversation_id()
        conversation = self._conversations.get(conversation_id) \
            if conversation_id is not None else None
        if conversation is None:
            self.statusBar().showMessage("Chat limits: send a first message to make the chat",
                                         4000)
            return
        own = RunLimits()
        if conversation.limits:
            with contextlib.suppress(ValueError):
                own = RunLimits.from_dict(json.loads(conversation.limits))
        dialog = ChatLimitsDialog(conversation.id, conversation.title, own,
                                  self.limit_defaults, self)
        dialog.chosen.connect(self.chat_limits_requested)
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()

    def _on_stop_all_action_triggered(self) -> None:
        if self._keyboard_is_free():
            self.stop_all_requested.emit()

    def refresh_run_state(self, *_: object) -> None:
        """Runs started or ended: the run actions and an open quit question follow."""
        self._refresh_run_actions()

    def _refresh_run_actions(self) -> None:
        """Stop and Restart apply to the current chat's run; Stop all to any run."""
        running_here = self._running_here() is not None
        self.stop_action.setEnabled(running_here)
        self.restart_action.setEnabled(running_here)
        self.stop_all_action.setEnabled(self.running_count() > 0)
        self.quit_prompt.refresh()

