"""The chat header's host control (issue 25): where the chat's turns run, "Host: local ▾" with
this computer, the settings' ``[hosts."NAME"]`` and "Other host…" (a typed destination, checked
by the same parser as ``tolaria run --host``); and the inline entry it and a remote chat's folder
are typed into, with its error on the same line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeyEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QSizePolicy,
    QToolButton,
    QWidget,
)

from tolaria.config.remote_hosts import configured_hosts, load_target
from tolaria.core.remote.hosts import BadDestination
from tolaria.ui import theme

LOCAL_LABEL = "local"
#: The header shows at most this much of a host's name.
_SHOWN_CHARS = 28
HOST_PLACEHOLDER = "ssh alias, user@host, ssh://user@host:port or exec:COMMAND"


def host_problem(spec: str) -> str | None:
    """Why ``spec`` cannot be a chat's host (the settings' ``[remote]``/``[hosts]`` applied,
    as ``tolaria run --host`` does), or None."""
    try:
        load_target(spec.strip())
    except BadDestination as exc:
        return str(exc)
    return None


def folder_problem(path: str) -> str | None:
    """A folder on a host is only checked there (when the turn starts); here: one line of
    printable text."""
    if any(not c.isprintable() for c in path):
        return "the folder contains control characters"
    return None


@dataclass(frozen=True)
class AgentRow:
    """One agent under a host in the Host menu: shown as ``text``, greyed unless ``usable``."""

    agent: str
    text: str
    usable: bool
    tip: str = ""


class HostButton(QToolButton):
    """"Host: local ▾": a menu of this computer, the configured hosts and "Other host…"; under
    each host the agents found there with their versions (greyed when not there), as Zed's
    remote picker lists them."""

    #: The user picked a host from the menu: the destination ("" for this computer).
    host_picked = Signal(str)
    #: The user picked an agent under a host: destination ("" for this computer), agent id.
    host_agent_picked = Signal(str, str)
    #: A host's agents are not known yet and the user asked to look: destination.
    look_requested = Signal(str)
    #: The user asked to type a host ("Other host…").
    other_requested = Signal()
    #: The user switched "Keep running when disconnected" (a chat on a host; ADR 0032).
    keep_running_toggled = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hostButton")
        self.setAccessibleName("Host")
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        # The arrow is in the text ("Host: local ▾"): the style's own indicator overlaps it.
        self.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")
        self.host = ""
        self.keep_running = False
        #: A host's agent rows (None: not looked at yet); set by the header.
        self.agent_rows: Callable[[str], list[AgentRow] | None] = lambda _host: []
        menu = QMenu(self)
        menu.setObjectName("hostMenu")
        menu.setToolTipsVisible(True)  # an agent's path, version, or why it is not there
        menu.aboutToShow.connect(self._fill_menu)
        self.setMenu(menu)
        self.set_host("")

    def set_host(self, host: str | None) -> None:
        self.host = host or ""
        shown = self.host or LOCAL_LABEL
        if len(shown) > _SHOWN_CHARS:  # e.g. a long exec: prefix: the whole in the tooltip
            shown = shown[:_SHOWN_CHARS - 1] + "…"
        self.setText(f"Host: {shown} ▾")
        self.setToolTip("Where this chat's agent runs: this computer, or another machine "
                        "through your ssh (or a command such as docker exec -i)"
                        + (f"\nNow: {self.host}" if self.host else ""))

    def _fill_menu(self) -> None:
        menu = self.menu()
        menu.clear()
        group = QActionGroup(menu)
        choices = [("", "Local (this computer)")]
        choices += [(name, name) for name in configured_hosts()]
        if self.host and self.host not in dict(choices):
            choices.append((self.host, self.host))
        for host, text in choices:
            action = QAction(text, menu)
            action.setCheckable(True)
            action.setChecked(host == self.host)
            action.setActionGroup(group)
            font = action.font()  # a heading over its agents
            font.setBold(True)
            action.setFont(font)
            action.triggered.connect(lambda _=False, h=host: self.host_picked.emit(h))
            menu.addAction(action)
            self._add_agents(menu, host)
            if not host:
                menu.addSeparator()
        menu.addSeparator()
        if self.host:
            keep = menu.addAction("Keep running when disconnected")
            keep.setCheckable(True)
            keep.setChecked(self.keep_running)
            keep.setToolTip("A lost connection (or Tolaria closing unexpectedly) does not stop "
                            "the agent there: Tolaria reconnects and shows what it missed")
            keep.toggled.connect(self.keep_running_toggled.emit)
            menu.addSeparator()
        other = menu.addAction("Other host…")
        other.triggered.connect(self.other_requested.emit)

    def _add_agents(self, menu: QMenu, host: str) -> None:
        rows = self.agent_rows(host)
        where = host or "this computer"
        if rows is None:
            look = menu.addAction(f"    ↻ Look for agents on {host}")
            look.setToolTip(f"Ask {host} which agents it has (through your ssh)")
            look.triggered.connect(lambda _=False, h=host: self.look_requested.emit(h))
            return
        for row in rows:
            action = menu.addAction(f"    {row.text}")
            action.setEnabled(row.usable)
            action.setToolTip(row.tip)
            action.setStatusTip(f"{row.text} on {where}")
            action.triggered.connect(
                lambda _=False, h=host, a=row.agent: self.host_agent_picked.emit(h, a))


class _Line(QLineEdit):
    cancelled = Signal()

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent) \
                and event.key() == Qt.Key.Key_Escape:
            event.accept()  # Esc closes this entry; the window's Stop must not take it
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            event.accept()  # the window's Esc (Stop) must not act on it
            self.cancelled.emit()
            return
        super().keyPressEvent(event)


class InlineEntry(QWidget):
    """One line under the header: "Host:" or "Folder on devbox:", the text, and what is wrong
    with it in red beside it. Enter applies what passes its check, Esc closes."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inlineEntry")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        self.label = QLabel(self)
        self.edit = _Line(self)
        self.edit.setObjectName("hostEdit")
        self.edit.setClearButtonEnabled(True)
        self.label.setBuddy(self.edit)
        self.error = QLabel(self)
        self.error.setObjectName("hostError")
        self.error.setTextFormat(Qt.TextFormat.PlainText)  # ssh's and the parser's words
        self.error.setWordWrap(True)
        self.error.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.label)
        layout.addWidget(self.edit, 2)
        layout.addWidget(self.error, 3)
        self.edit.returnPressed.connect(self._apply)
        self.edit.cancelled.connect(self.close_entry)
        self.edit.textEdited.connect(lambda _text: self.error.clear())
        self._check: Callable[[str], str | None] = lambda _text: None
        self._done: Callable[[str], None] = lambda _text: None
        self.hide()

    def ask(self, label: str, text: str, placeholder: str,
            check: Callable[[str], str | None], done: Callable[[str], None]) -> None:
        self.label.setText(label)
        self.edit.setText(text)
        self.edit.setPlaceholderText(placeholder)
        self.edit.setAccessibleName(label.rstrip(":"))
        self.error.clear()
        self._check, self._done = check, done
        self.show()
        self.edit.selectAll()
        self.edit.setFocus()

    def show_error(self, message: str) -> None:
        theme.follow_color(self.error, theme.error_text)
        self.error.setText(message)
        self.show()

    def close_entry(self) -> None:
        self.error.clear()
        self.hide()

    def _apply(self) -> None:
        text = self.edit.text().strip()
        problem = self._check(text)
        if problem is not None:
            self.show_error(problem)
            return
        self.close_entry()
        self._done(text)
