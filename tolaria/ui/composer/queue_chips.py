"""The messages queued behind a running turn, as a compact chip bar above the composer.

A header says how many wait and whether they go when the turn ends or are paused (and why: by
the user, at quit, or after a crash, so nothing is sent by surprise), with Pause/Resume. Each chip
is one line of elided text, dragged to reorder; its actions show on hover or keyboard focus:
move up/down (Alt+Up/Down), "Send now", edit in place (double-click, F2), take back into the composer, remove
(Delete). The bar follows the controller's ``queue_changed``: a chip disappears the moment its
message is delivered to the agent. A message the chat's agent cannot take now (an image after a
switch to an agent that takes none) has a line under its chip saying why, with "Remove image";
the queue waits at it (chats/engine/queue_hold.py).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QMimeData, QPoint, Qt, Signal
from PySide6.QtGui import (
    QDrag,
    QDragEnterEvent,
    QDragMoveEvent,
    QDropEvent,
    QFocusEvent,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
)
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from tolaria.chats.engine.queue_hold import holds_all_files
from tolaria.chats.inflight import QueuedMessage, QueueState
from tolaria.core.store.queue import PAUSED_AFTER_CRASH, PAUSED_AT_QUIT
from tolaria.ui import theme

#: The drag payload of a chip: its message id.
DRAG_MIME = "application/x-tolaria-queued-message"

#: Why the queue is paused, as the header says it.
_PAUSED_WHY = {
    PAUSED_AFTER_CRASH: "Tolaria quit unexpectedly; these were not sent",
    PAUSED_AT_QUIT: "not sent before Tolaria quit",
}


class ElidedLabel(QLabel):
    """One line of plain text, elided to the width it gets; ``text()`` stays the full text."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setToolTip(text if len(text) <= 2000 else text[:2000] + "…")

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        line = " ".join(self.text().split())
        shown = self.fontMetrics().elidedText(line, Qt.TextElideMode.ElideRight,
                                              self.contentsRect().width())
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.contentsRect(), int(Qt.AlignmentFlag.AlignVCenter), shown)


def _action(parent: QWidget, name: str, label: str, tip: str) -> QPushButton:
    button = QPushButton(label, parent)
    button.setObjectName(name)
    button.setFlat(True)
    button.setToolTip(tip)
    button.setAccessibleName(tip.split(" (")[0])
    button.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the chip has the keyboard; these the mouse
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    return button


class QueuedChip(QFrame):
    #: Take this message back into the composer: message id, text.
    edit_requested = Signal(int, str)
    #: Drop this message: message id.
    remove_requested = Signal(int)
    #: Move this message by an offset in the delivery order: message id, offset (-1, +1).
    move_requested = Signal(int, int)
    #: Stop the running turn and send this message next, alone: message id.
    send_now_requested = Signal(int)
    #: Give this message new text, keeping its place: message id, text.
    rewrite_requested = Signal(int, str)

    def __init__(self, message: QueuedMessage, index: int, count: int,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("queuedChip")
        self.message = message
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setAttribute(Qt.WidgetAttribute.WA_Hover)
        #: Where the left button went down (a drag starts from there).
        self._press: QPoint | None = None
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 0, 4, 0)
        row.setSpacing(2)
        number = QLabel(str(index + 1), self)
        number.setObjectName("queuedIndex")
        row.addWidget(number)
        self.label = ElidedLabel(message.text, self)
        self.label.setObjectName("queuedText")
        row.addWidget(self.label, 1)
        #: Its files (sent with it), said by count; their names in the tooltip.
        self.files = QLabel(self)
        self.files.setObjectName("queuedFiles")
        if message.attachments:
            count_files = len(message.attachments)
            self.files.setText(f"+ {count_files} file{'s' if count_files != 1 else ''}")
            self.files.setToolTip("Sent with it: " + ", ".join(
                a.name for a in message.attachments))
        self.files.setVisible(bool(message.attachments))
        row.addWidget(self.files)
        self.editor = QLineEdit(self)
        self.editor.setObjectName("queuedTextEdit")
        self.editor.hide()
        self.editor.returnPressed.connect(self._commit_edit)
        self.editor.installEventFilter(self)
        row.addWidget(self.editor, 1)
        mid = message.id
        self.up = _action(self, "queuedUpButton", "↑", "Move up (Alt+Up)")
        self.up.setEnabled(index > 0)
        self.up.clicked.connect(lambda: self.move_requested.emit(mid, -1))
        self.down = _action(self, "queuedDownButton", "↓", "Move down (Alt+Down)")
        self.down.setEnabled(index < count - 1)
        self.down.clicked.connect(lambda: self.move_requested.emit(mid, 1))
        send = _action(self, "queuedSendNowButton", "Send now",
                       "Send this message next, alone (stops the running turn)")
        send.clicked.connect(lambda: self.send_now_requested.emit(mid))
        edit = _action(self, "queuedEditButton", "Edit",
                       "Take this message back into the composer")
        edit.clicked.connect(lambda: self.edit_requested.emit(mid, message.text))
        remove = _action(self, "queuedRemoveButton", "✕", "Do not send this message (Delete)")
        remove.clicked.connect(lambda: self.remove_requested.emit(mid))
        self.action_buttons = [self.up, self.down, send, edit, remove]
        for button in self.action_buttons:
            row.addWidget(button)
        # The same height with or without the hover actions: no row jumps under the pointer.
        self.ensurePolished()
        edit.ensurePolished()
        self.setMinimumHeight(edit.sizeHint().height() + 2)
        self._show_actions(False)
        with_files = (f" (with {len(message.attachments)} attached file"
                      f"{'s' if len(message.attachments) != 1 else ''})"
                      if message.attachments else "")
        self.setAccessibleName(
            f"Queued message {index + 1} of {count}{with_files}: {message.text[:200]}")
        self.setToolTip("Double-click or F2 to edit in place")

    def _show_actions(self, shown: bool) -> None:
        for button in self.action_buttons:
            button.setVisible(shown and not self.editor.isVisible())

    def event(self, event: QEvent) -> bool:
        kind = event.type()
        if kind in (QEvent.Type.HoverEnter, QEvent.Type.HoverLeave):
            self._show_actions(kind == QEvent.Type.HoverEnter or self.hasFocus())
        # F2 and Delete on a focused chip act on the chip: the window's F2 (rename chat) and
        # Del (delete chat) shortcuts must not take them first.
        if (kind == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent)
                and event.key() in (Qt.Key.Key_F2, Qt.Key.Key_Delete)
                and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier):
            event.accept()
            return True
        return super().event(event)

    def focusInEvent(self, event: QFocusEvent) -> None:
        self._show_actions(True)
        super().focusInEvent(event)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        self._show_actions(self.underMouse())
        super().focusOutEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key, alt = event.key(), bool(event.modifiers() & Qt.KeyboardModifier.AltModifier)
        if alt and key in (Qt.Key.Key_Up, Qt.Key.Key_Down):
            self.move_requested.emit(self.message.id, -1 if key == Qt.Key.Key_Up else 1)
        elif key == Qt.Key.Key_Delete:
            self.remove_requested.emit(self.message.id)
        elif key in (Qt.Key.Key_F2, Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.start_edit()
        else:
            super().keyPressEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        self.start_edit()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._press = event.position().toPoint()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        """Drag the chip to another place in the queue (the bar takes the drop)."""
        press = self._press
        if (press is None or not event.buttons() & Qt.MouseButton.LeftButton
                or (event.position().toPoint() - press).manhattanLength()
                < QApplication.startDragDistance()):
            return
        self._press = None
        mime = QMimeData()
        mime.setData(DRAG_MIME, str(self.message.id).encode())
        drag = QDrag(self)
        drag.setMimeData(mime)
        drag.setPixmap(self.grab())
        drag.setHotSpot(press)
        drag.exec(Qt.DropAction.MoveAction)

    def start_edit(self) -> None:
        """Edit the text in place (Enter keeps it, Esc cancels); the message keeps its place."""
        self.editor.setText(self.message.text)
        self.label.hide()
        self.editor.show()
        self._show_actions(False)
        self.editor.setFocus()
        self.editor.selectAll()

    def _commit_edit(self) -> None:
        text = self.editor.text()
        self._end_edit()
        if text.strip() and text != self.message.text:
            self.rewrite_requested.emit(self.message.id, text)

    def _end_edit(self) -> None:
        self.editor.hide()
        self.label.show()
        self.setFocus()

    def eventFilter(self, watched: object, event: QEvent) -> bool:
        if (watched is not self.editor or not isinstance(event, QKeyEvent)
                or event.key() != Qt.Key.Key_Escape):
            return False
        if event.type() == QEvent.Type.ShortcutOverride:
            event.accept()  # Esc cancels the edit here; it must not reach the window's Stop
            return True
        if event.type() == QEvent.Type.KeyPress:
            self._end_edit()
            return True
        return False


class HeldNote(QFrame):
    """Under the chip of the message the queue waits at: why it cannot go, and the way out."""

    def __init__(self, message: QueuedMessage, why: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("queuedHeld")
        self.message_id = message.id
        row = QHBoxLayout(self)
        row.setContentsMargins(24, 0, 4, 0)
        row.setSpacing(6)
        self.label = QLabel(why, self)
        self.label.setObjectName("queuedHeldWhy")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        theme.follow_color(self.label, theme.warning_color)
        row.addWidget(self.label, 1)
        images = sum(a.is_image for a in message.attachments)
        what = ("image" if images == 1 else "images") if images and not holds_all_files(why) \
            else ("file" if len(message.attachments) == 1 else "files")
        self.remove = _action(self, "queuedDropFilesButton", f"Remove {what}",
                              f"Send this message without its {what}")
        self.remove.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        row.addWidget(self.remove, 0, Qt.AlignmentFlag.AlignTop)
        self.setAccessibleName(f"Queued message waits: {why}")


class QueuedChips(QWidget):
    #: Take the files off the message the queue waits at (its text goes): message id.
    drop_files_requested = Signal(int)
    #: See ``QueuedChip``.
    edit_requested = Signal(int, str)
    #: See ``QueuedChip``.
    remove_requested = Signal(int)
    #: See ``QueuedChip``.
    move_requested = Signal(int, int)
    #: See ``QueuedChip``.
    send_now_requested = Signal(int)
    #: See ``QueuedChip``.
    rewrite_requested = Signal(int, str)
    #: Pause (True) or resume (False) the queue.
    pause_requested = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("queuedChips")
        self.setAcceptDrops(True)
        self.state = QueueState()
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(12, 0, 12, 0)
        self._layout.setSpacing(3)
        head = QHBoxLayout()
        head.setContentsMargins(2, 0, 0, 0)
        self.header = QLabel(self)
        self.header.setObjectName("queueHeader")
        head.addWidget(self.header, 1)
        self.pause_button = _action(self, "queuePauseButton", "Pause",
                                    "Do not send these when the turn ends")
        self.pause_button.clicked.connect(
            lambda: self.pause_requested.emit(not self.state.paused))
        head.addWidget(self.pause_button)
        self._layout.addLayout(head)
        self._chips: list[QueuedChip] = []
        #: The note under the held message's chip (None when nothing is held).
        self.held_note: HeldNote | None = None
        self._restyle()
        theme.on_palette_change(self, self._restyle)
        self.hide()

    def _restyle(self) -> None:
        chip_bg, hover = theme.card_background(), theme.prompt_background()
        muted, line = theme.css(theme.muted_text()), theme.css(theme.border())
        self.setStyleSheet(
            f"QFrame#queuedChip {{ background: {theme.css(chip_bg)}; border: 1px solid {line};"
            f" border-radius: 8px; }}"
            f"QFrame#queuedChip:hover, QFrame#queuedChip:focus {{ background: {theme.css(hover)};"
            f" border-color: {theme.css(theme.accent())}; }}"
            f"QLabel#queuedIndex {{ color: {muted}; min-width: 14px; }}"
            f"QLabel#queueHeader {{ color: {muted}; }}"
            f"QFrame#queuedChip QPushButton {{ padding: 0px 6px; min-height: 20px; }}")

    def set_state(self, state: QueueState) -> None:
        focused = next((c.message.id for c in self._chips if c.hasFocus()), None)
        self.state = state
        for chip in self._chips:
            self._layout.removeWidget(chip)
            chip.hide()
            chip.deleteLater()
        self._chips = []
        if self.held_note is not None:
            self._layout.removeWidget(self.held_note)
            self.held_note.hide()
            self.held_note.deleteLater()
            self.held_note = None
        count = len(state.messages)
        for index, message in enumerate(state.messages):
            chip = QueuedChip(message, index, count, self)
            chip.edit_requested.connect(self.edit_requested)
            chip.remove_requested.connect(self.remove_requested)
            chip.move_requested.connect(self.move_requested)
            chip.send_now_requested.connect(self.send_now_requested)
            chip.rewrite_requested.connect(self.rewrite_requested)
            self._layout.addWidget(chip)
            self._chips.append(chip)
            chip.show()  # now: a child added to a shown widget would be shown a loop turn later
            if message.id == focused:
                chip.setFocus()  # Alt+Up pressed again moves the same message on
            if message.id == state.held:
                self.held_note = HeldNote(message, state.held_why, self)
                self.held_note.remove.clicked.connect(
                    lambda _=False, mid=message.id: self.drop_files_requested.emit(mid))
                self._layout.addWidget(self.held_note)
                self.held_note.show()
        self.header.setText(self._header_text(state))
        warn = (state.paused and state.reason in _PAUSED_WHY) or bool(state.held)
        theme.follow(self.header, (lambda: f"color: {theme.css(theme.warning_color())};")
                     if warn else str)
        self.pause_button.setText("Resume" if state.paused else "Pause")
        self.pause_button.setToolTip("Send these when no turn runs, or after this one"
                                     if state.paused else "Do not send these when the turn ends")
        self.setVisible(bool(self._chips))

    def set_messages(self, messages: list[QueuedMessage]) -> None:
        """Show these messages, the queue not paused (kept for callers with a plain list)."""
        self.set_state(QueueState(tuple(messages)))

    @staticmethod
    def _header_text(state: QueueState) -> str:
        count = len(state.messages)
        what = f"{count} queued" if count != 1 else "1 queued"
        held = [m.id for m in state.messages].index(state.held) + 1 \
            if state.held in [m.id for m in state.messages] else 0
        if held and not state.paused:
            return f"{what} · waiting at message {held}: it cannot go to this agent"
        if not state.paused:
            return f"{what} · sent when this turn ends"
        why = _PAUSED_WHY.get(state.reason or "", "not sent when the turn ends")
        return f"{what} · paused: {why}"

    def chips(self) -> list[QueuedChip]:
        return list(self._chips)

    # -- drag to reorder ------------------------------------------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasFormat(DRAG_MIME):
            event.acceptProposedAction()

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if event.mimeData().hasFormat(DRAG_MIME):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        """A chip dropped here goes where it was dropped: before the first chip whose middle is
        below the drop point (or last)."""
        data = event.mimeData()
        if not data.hasFormat(DRAG_MIME):
            return
        try:
            message_id = int(bytes(data.data(DRAG_MIME).data()).decode())
        except ValueError:
            return
        ids = [c.message.id for c in self._chips]
        if message_id not in ids:
            return
        y = event.position().y()
        target = next((i for i, c in enumerate(self._chips) if y < c.geometry().center().y()),
                      len(self._chips))
        current = ids.index(message_id)
        offset = (target - 1 if target > current else target) - current
        event.acceptProposedAction()
        if offset:
            self.move_requested.emit(message_id, offset)
