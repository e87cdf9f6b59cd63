"""``@`` and ``/`` in the composer: the mention picker and the slash menu (issue 26 items 3, 4).

It watches the composer's text and cursor: ``@`` followed by a path being typed (at the start or
after a space) opens the picker over the chat's folder; ``/`` as the first thing typed opens the
command menu. It reads the keys the list needs before the composer does (an event filter): Up
and Down move, Enter or Tab choose (Tab on a folder goes into it), Esc closes. The files come
from ``MentionSource`` (listed off the window's thread, cached per folder); matching runs per
keystroke on the window's thread within the benchmark's budget (bench/mention_picker.py).
"""

from __future__ import annotations

import os
import re
import time

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit

from tolaria.chats.mentions.cache import Indexed
from tolaria.chats.mentions.forms import spell
from tolaria.chats.mentions.hosted import hosted_where
from tolaria.chats.slash import AgentCommand, claude_commands
from tolaria.qt.mention_source import MentionSource, shared_source
from tolaria.ui.composer.mention_look import MentionHighlighter
from tolaria.ui.composer.slash_menu import slash_rows
from tolaria.ui.composer.suggestions import Suggestion, SuggestionList

#: ``@`` at the start of the line or after a space or bracket, then the path typed so far.
_MENTION_AT_CURSOR = re.compile(r'(?:^|(?<=[\s(\[{]))@([^\s"]*)$')
#: ``/`` as the first thing in the composer, then the command typed so far.
_SLASH_AT_CURSOR = re.compile(r"^/([\w:.-]*)$")
#: A whole mention ending at the cursor (Backspace removes it at once).
_TOKEN_BEFORE = re.compile(r'(?:^|(?<=[\s(\[{]))@(?:"([^"\n]+)"|(\S+))$')
#: Agents whose own commands the menu lists (read from their files).
_CLAUDE_AGENTS = frozenset({"claude"})
_AGENT_COMMANDS_TTL_S = 10.0

_LIST_KEYS = frozenset({Qt.Key.Key_Escape, Qt.Key.Key_Up, Qt.Key.Key_Down, Qt.Key.Key_Return,
                        Qt.Key.Key_Enter, Qt.Key.Key_Tab, Qt.Key.Key_PageUp,
                        Qt.Key.Key_PageDown})
MENTION_HINT = "↑↓ move · Enter insert · Tab open folder · Esc close"
SLASH_HINT = "↑↓ move · Enter run or insert · Esc close"


class ComposerAssist(QObject):
    #: The user chose one of Tolaria's commands in the ``/`` menu: its name.
    command_requested = Signal(str)

    def __init__(self, composer: QPlainTextEdit, source: MentionSource | None = None) -> None:
        super().__init__(composer)
        self._composer = composer
        self._source = source or shared_source()
        self._source.indexed.connect(self._on_source_indexed)
        self._source.failed.connect(self._on_source_failed)
        self._cwd: str | None = None
        #: The chat's host ("" on this machine): its folder is listed there.
        self._host = ""
        self._agent = ""
        self._agent_name = ""
        self._mode = ""
        self._start = 0
        self._query = ""
        #: (mode, start) of a list the user closed with Esc: not reopened for that token.
        self._dismissed: tuple[str, int] | None = None
        self._failure = ""
        self._agent_commands: tuple[float, str, list[AgentCommand]] | None = None
        #: Agent id -> the commands its session offers (ACP ``available_commands_update``).
        self._session_commands: dict[str, list[AgentCommand]] = {}
        self.list = SuggestionList(composer.window())
        self.list.activated.connect(self._on_list_activated)
        composer.destroyed.connect(self.list.deleteLater)  # it lives in the window, not the pane
        self.highlighter = MentionHighlighter(composer.document(), self._is_mention)
        #: Paths chosen in the picker (shown as mentions even before the folder is listed).
        self.chosen: set[str] = set()
        composer.installEventFilter(self)
        host = self.list.parentWidget()
        if host is not None and host is not composer:
            host.installEventFilter(self)  # a resized window moves the list with the composer
        composer.textChanged.connect(self._refresh)
        composer.cursorPositionChanged.connect(self._refresh)

    # -- the chat -------------------------------------------------------------------------------
    def set_context(self, cwd: str | None, agent: str, agent_name: str = "", *,
                    host: str = "") -> None:
        """The chat's folder (what ``@`` lists: on ``host`` when it has one) and agent (whose
        commands ``/`` lists)."""
        before = self._where()
        self._cwd = cwd or None
        self._host = host
        if self._where() != before:
            self._failure = ""
        self._agent = agent
        self._agent_name = agent_name or agent
        self._agent_commands = None
        self.highlighter.rehighlight()

    def set_session_commands(self, commands: list[AgentCommand]) -> None:
        """What the chat's agent's running session says it offers (listed until it says
        otherwise, kept per agent)."""
        self._session_commands[self._agent] = commands
        if self._mode == "slash":
            self._show_commands(self._query)

    @property
    def mode(self) -> str:
        """``mention``, ``slash`` or ``""`` (the list is closed)."""
        return self._mode

    # -- what the cursor is in ------------------------------------------------------------------
    def _before_cursor(self) -> tuple[str, int]:
        cursor = self._composer.textCursor()
        block = cursor.block()
        return block.text()[: cursor.positionInBlock()], block.position()

    def _refresh(self) -> None:
        if self._composer.textCursor().hasSelection():
            self.close()
            return
        before, block_start = self._before_cursor()
        slash = _SLASH_AT_CURSOR.match(before) if block_start == 0 else None
        if slash is not None:
            self._open("slash", 0, slash.group(1))
            return
        mention = _MENTION_AT_CURSOR.search(before)
        if mention is not None and self._cwd:
            self._open("mention", block_start + mention.start(), mention.group(1))
            return
        self.close()

    def _open(self, mode: str, start: int, query: str) -> None:
        if self._dismissed == (mode, start):
            return
        self._dismissed = None
        self._mode = mode
        self._start = start
        self._query = query
        if mode == "slash":
            self._show_commands(query)
        else:
            self._show_files(query)

    def close(self) -> None:
        self._mode = ""
        self.list.hide()

    # -- rows -----------------------------------------------------------------------------------
    def _where(self) -> str:
        """The folder as the mention source knows it (a hosted where on a host)."""
        root = self._cwd or ""
        return hosted_where(self._host, root) if self._host and root else root

    def _show_files(self, query: str) -> None:
        root = self._cwd or ""
        known = self._source.request(self._where())
        folder = os.path.basename(root.rstrip(os.sep)) or root
        if known is None:
            waiting = (f"Listing files on {self._host}…" if self._host
                       else f"Listing the files of {folder}…")
            title = self._failure or waiting
            self.list.set_rows([], title, MENTION_HINT,
                               empty="" if not self._failure else "Type a path")
        else:
            rows = [Suggestion(m.name, m.parent, "folder" if m.is_folder else "file", m.path)
                    for m in known.index.search(query)]
            count = f"{len(known.index):,}"
            more = "" if not known.listing.truncated else (
                " (the walk stopped at its limit)" if known.listing.source == "walk"
                else " (the listing was cut at its limit)")
            where = f"{folder} on {self._host}" if self._host else folder
            self.list.set_rows(rows, f"Files and folders in {where} · {count}{more}",
                               MENTION_HINT, empty="No file or folder matches")
        self.list.place_over(self._composer)

    def _show_commands(self, query: str) -> None:
        rows = slash_rows(query, self._commands_of_agent(), self._agent_name)
        if not rows:
            self.close()
            return
        self.list.set_rows(rows, "Commands", SLASH_HINT)
        self.list.place_over(self._composer)

    def _commands_of_agent(self) -> list[AgentCommand]:
        session = self._session_commands.get(self._agent, [])
        if self._agent not in _CLAUDE_AGENTS or self._host:  # its files are on the host
            return session
        named = {c.name for c in session}
        return [*session, *(c for c in self._claude_commands() if c.name not in named)]

    def _claude_commands(self) -> list[AgentCommand]:
        now = time.monotonic()
        cached = self._agent_commands
        if cached is not None and cached[1] == (self._cwd or "") and now - cached[0] < \
                _AGENT_COMMANDS_TTL_S:
            return cached[2]
        commands = claude_commands(self._cwd)
        self._agent_commands = (now, self._cwd or "", commands)
        return commands

    def _on_source_indexed(self, root: str, indexed: Indexed) -> None:
        del indexed
        if root == self._where():
            self._failure = ""
            self.highlighter.rehighlight()
            if self._mode == "mention":
                self._show_files(self._query)

    def _on_source_failed(self, root: str, message: str) -> None:
        if root == self._where():
            self._failure = message
            if self._mode == "mention":
                self._show_files(self._query)

    # -- choosing -------------------------------------------------------------------------------
    def _on_list_activated(self, index: int) -> None:
        rows = self.list.rows()
        if 0 <= index < len(rows):
            self._choose(rows[index], drill=False)

    def _choose(self, row: Suggestion, *, drill: bool) -> None:
        cursor = self._composer.textCursor()
        cursor.setPosition(self._start)
        cursor.setPosition(self._composer.textCursor().position(),
                           QTextCursor.MoveMode.KeepAnchor)
        if self._mode == "slash" and row.kind == "tolaria":
            cursor.removeSelectedText()
            self.close()
            self.command_requested.emit(row.value)
            return
        if self._mode == "slash":
            cursor.insertText(f"/{row.value} ")
            self.close()
            return
        if drill and row.kind == "folder":
            cursor.insertText(f"@{row.value}")  # the picker stays open, inside the folder
            return
        self.chosen.add(row.value)
        cursor.insertText(spell(row.value) + " ")
        self._composer.setTextCursor(cursor)
        self.close()

    # -- keys -----------------------------------------------------------------------------------
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is not self._composer:
            if event.type() == QEvent.Type.Resize and self.list.isVisible():
                self.list.place_over(self._composer)
            return False
        if event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            return self._key(event)
        if (event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent)
                and self._mode and self.list.isVisible() and event.key() in _LIST_KEYS):
            event.accept()  # Esc closes the list here, it does not stop the run
            return True
        if event.type() == QEvent.Type.FocusOut:
            self.list.hide()
        elif event.type() == QEvent.Type.FocusIn and self._mode:
            self.list.place_over(self._composer)
        return False

    def _key(self, event: QKeyEvent) -> bool:
        key = event.key()
        if self._mode and self.list.isVisible():
            if key in (Qt.Key.Key_Up, Qt.Key.Key_Down):
                self.list.move(-1 if key == Qt.Key.Key_Up else 1)
                return True
            if key in (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown):
                self.list.move(-8 if key == Qt.Key.Key_PageUp else 8)
                return True
            if key == Qt.Key.Key_Escape:
                self._dismissed = (self._mode, self._start)
                self.close()
                return True
            plain = not event.modifiers() & (Qt.KeyboardModifier.ShiftModifier
                                             | Qt.KeyboardModifier.ControlModifier)
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Tab) and plain:
                row = self.list.current_row()
                if row is not None:
                    self._choose(row, drill=key == Qt.Key.Key_Tab)
                    return True
                if key == Qt.Key.Key_Tab:
                    return True
        if key == Qt.Key.Key_Backspace and not event.modifiers():
            return self._remove_mention_before_cursor()
        return False

    def _remove_mention_before_cursor(self) -> bool:
        """Backspace right after a mention removes all of it (it reads as one chip)."""
        cursor = self._composer.textCursor()
        if cursor.hasSelection():
            return False
        before, block_start = self._before_cursor()
        found = _TOKEN_BEFORE.search(before)
        if found is None or not self._is_mention(found.group(1) or found.group(2) or ""):
            return False
        cursor.setPosition(block_start + found.start())
        cursor.setPosition(self._composer.textCursor().position(),
                           QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        return True

    def _is_mention(self, path: str) -> bool:
        if path in self.chosen:
            return True
        known = self._source.known(self._where()) if self._cwd else None
        return known is not None and known.index.has(path)
