"""Small building blocks of the settings pages: an inline error label (and a field boxed with
its label), and a path chooser."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from tolaria.ui import theme


def error_text_color() -> QColor:
    """Red enough to read as an error on light and dark palettes."""
    return theme.mix(theme.text(), QColor(220, 50, 47), 0.8)


class ErrorLabel(QLabel):
    """The message of one invalid field, right under it; hidden while the field is valid.

    ``reserve``: the label always takes one line, empty while the field is valid, and a long
    message is shortened with "…" (the whole of it in the tooltip). A form whose messages come
    and go as you type then never moves its fields under the mouse."""

    def __init__(self, name: str, parent: QWidget | None = None, *,
                 reserve: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName(name)
        self.reserve = reserve
        theme.follow_color(self, error_text_color)
        if reserve:
            self.setFixedHeight(self.fontMetrics().height() + 2)
            self.setMinimumWidth(1)  # a long message must not widen the form either
        else:
            self.setWordWrap(True)
            self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.setVisible(False)

    def show_message(self, message: str) -> None:
        self.setText(message)
        if self.reserve:
            self.setToolTip(message)
            return
        # isHidden, not isVisible: the page itself may not be shown yet.
        self.setVisible(bool(message))

    def paintEvent(self, event: QPaintEvent) -> None:
        if not self.reserve:
            super().paintEvent(event)
            return
        painter = QPainter(self)
        painter.setPen(error_text_color())
        line = " ".join(self.text().split())
        shown = self.fontMetrics().elidedText(line, Qt.TextElideMode.ElideRight, self.width())
        painter.drawText(self.rect(), int(Qt.AlignmentFlag.AlignLeft
                                          | Qt.AlignmentFlag.AlignVCenter), shown)
        painter.end()


def muted(label: QLabel) -> QLabel:
    """``label`` in the muted text colour, wrapping: a note under a field."""
    theme.follow_color(label, theme.muted_text)
    label.setWordWrap(True)
    return label


def title_label(parent: QWidget, name: str) -> QLabel:
    """The bold, slightly larger heading of a form (an agent's or a server's name)."""
    title = QLabel(parent)
    title.setObjectName(name)
    font = title.font()
    font.setBold(True)
    font.setPointSizeF(font.pointSizeF() * 1.15)
    title.setFont(font)
    return title


def column_button(parent: QWidget, text: str, name: str, column: QVBoxLayout) -> QPushButton:
    """A button added to a page's side column (never the dialog's default button)."""
    button = QPushButton(text, parent)
    button.setObjectName(name)
    button.setAutoDefault(False)
    column.addWidget(button)
    return button


def scrolled(widget: QWidget, parent: QWidget) -> QScrollArea:
    """``widget`` (a long form) in a frameless scroll area that resizes it to its width."""
    scroll = QScrollArea(parent)
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QScrollArea.Shape.NoFrame)
    scroll.setWidget(widget)
    return scroll


def with_error_label(parent: QWidget, field: QWidget, name: str, *,
                     reserve: bool = False) -> tuple[QWidget, ErrorLabel]:
    """``field`` and its ErrorLabel (object name ``<name>Error``) right under it, in one box
    for a form row; returns the box and the label."""
    box = QWidget(parent)
    column = QVBoxLayout(box)
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(2)
    column.addWidget(field)
    label = ErrorLabel(f"{name}Error", box, reserve=reserve)
    column.addWidget(label)
    return box, label


class PathField(QWidget):
    """A line edit plus "Browse…" (a non-modal chooser: ``open()``, never ``exec()``)."""

    #: The text changed (typed or chosen): text.
    edited = Signal(str)

    def __init__(self, name: str, placeholder: str, folder: bool,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._folder = folder
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.edit = QLineEdit(self)
        self.edit.setObjectName(name)
        self.edit.setPlaceholderText(placeholder)
        self.edit.setClearButtonEnabled(True)
        self.edit.textEdited.connect(self.edited)
        layout.addWidget(self.edit, 1)
        self.browse = QPushButton("Browse…", self)
        self.browse.setObjectName(f"{name}Browse")
        self.browse.setAutoDefault(False)
        self.browse.clicked.connect(self._on_browse_clicked)
        layout.addWidget(self.browse)
        self._dialog: QFileDialog | None = None

    def text(self) -> str:
        return self.edit.text().strip()

    def set_text(self, text: str) -> None:
        self.edit.setText(text)

    def _on_browse_clicked(self) -> None:
        start = self.text() or os.path.expanduser("~")
        title = "Choose a folder" if self._folder else "Choose the agent's program"
        dialog = QFileDialog(self, title, start if os.path.isdir(start) else os.path.dirname(start))
        if self._folder:
            dialog.setFileMode(QFileDialog.FileMode.Directory)
            dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        else:
            dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.fileSelected.connect(self._on_dialog_file_selected)
        self._dialog = dialog
        dialog.open()

    def _on_dialog_file_selected(self, path: str) -> None:
        self._dialog = None
        if path:
            self.edit.setText(path)
            self.edited.emit(path)
