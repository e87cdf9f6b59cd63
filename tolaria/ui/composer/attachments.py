"""The attachments of the message being written (ADR 0028): an Attach… button, paste (Ctrl+V of
an image or of copied files) and drag and drop onto the composer, and a row of chips above it.

The tray emits ``attach_requested`` with an ``AttachIntent`` (the window's ``AttachControl``
checks and stores each file on a worker thread) and renders each ``AttachSettled`` on its chip.
The composer itself is not changed: the tray watches its key presses (Ctrl+V) and its drops with
an event filter, and takes only what carries files or an image (text pastes as before).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QMimeData, QObject, Qt, Signal
from PySide6.QtGui import (
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QImage,
    QKeyEvent,
    QKeySequence,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.core.attachments.model import Attachment
from tolaria.qt.attach_control import MAX_FILES, AttachIntent, AttachSettled
from tolaria.ui import theme
from tolaria.ui.composer.attachment_chip import CHECKING, READY, REFUSED, AttachmentChip

_keys = itertools.count(1)


def _files_of(mime: QMimeData) -> list[str]:
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]


class AttachmentTray(QScrollArea):
    #: Check and store these files or this image: AttachIntent.
    attach_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentTray")
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        inner = QWidget(self)
        column = QVBoxLayout(inner)
        column.setContentsMargins(12, 4, 12, 4)
        column.setSpacing(4)
        #: Why some files were not taken (a line of its own over the chips, never pushing them).
        self.notice = QLabel(inner)
        self.notice.hide()
        column.addWidget(self.notice)
        self._row = QHBoxLayout()
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.setSpacing(6)
        self._row.addStretch(1)
        column.addLayout(self._row)
        self.setWidget(inner)
        self.chips: dict[str, AttachmentChip] = {}
        #: The chat's agent: its name, and whether it takes images at all (its manifest).
        self._agent_name = ""
        self._takes_images = True
        #: The Attach… button, placed by the pane next to the composer.
        self.button = QToolButton(parent)
        self.button.setObjectName("attachButton")
        self.button.setText("+")
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.button.setFixedSize(36, 36)
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.setToolTip("Attach files or images (or paste them, or drop them on the "
                               "message)")
        self.button.setAccessibleName("Attach files")
        self.button.clicked.connect(self.open_picker)
        self._dialog: QFileDialog | None = None
        self.restyle()
        self._fit()
        self.hide()

    # -- input ---------------------------------------------------------------------------------
    def watch(self, editor: QPlainTextEdit) -> None:
        """Take Ctrl+V of files or an image, and drops, on ``editor`` (its text paste stays)."""
        self._filter = _EditorFilter(self, editor)

    def open_picker(self) -> None:
        dialog = QFileDialog(self.window(), "Attach files")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
        dialog.filesSelected.connect(self.add_paths)
        self._dialog = dialog
        dialog.open()  # not exec(): no nested loop under qasync

    def take_mime(self, mime: QMimeData) -> bool:
        """Attach what ``mime`` carries (files or an image); False when it carries neither."""
        files = _files_of(mime)
        if files:
            self.add_paths(files)
            return True
        if mime.hasImage():
            image = mime.imageData()
            if isinstance(image, QImage) and not image.isNull():
                self.add_image(image)
                return True
        return False

    def add_paths(self, paths: list[str]) -> None:
        room = MAX_FILES - len(self.chips)
        taken, left = paths[:max(room, 0)], len(paths) - max(room, 0)
        self._say(f"{left} more file{'s' if left != 1 else ''} not attached: at most "
                  f"{MAX_FILES} per message" if left > 0 else "")
        if not taken:
            return
        keys = tuple(self._chip(path.rsplit("/", 1)[-1] or path) for path in taken)
        self.attach_requested.emit(AttachIntent(keys, paths=tuple(taken),
                                                pending=tuple(self.attachments())))

    def add_image(self, image: QImage) -> None:
        if len(self.chips) >= MAX_FILES:
            self._say(f"not attached: at most {MAX_FILES} files per message")
            return
        key = self._chip("pasted image.png")
        self.attach_requested.emit(AttachIntent((key,), image=image,
                                                pending=tuple(self.attachments())))

    # -- facts ---------------------------------------------------------------------------------
    def set_agent(self, name: str, takes_images: bool) -> None:
        """The chat's agent: an image chip says at once when this one cannot take it."""
        self._agent_name, self._takes_images = name, takes_images
        for chip in self.chips.values():
            self._warn(chip)

    def _warn(self, chip: AttachmentChip) -> None:
        image = chip.attachment is not None and chip.attachment.is_image
        if image and not self._takes_images:
            chip.set_warning("this agent takes no images",
                             f"{self._agent_name or 'This agent'} cannot take images: pick an "
                             "agent that can see images, or remove it")
        else:
            chip.set_warning("")

    def settle(self, settled: AttachSettled) -> None:
        chip = self.chips.get(settled.key)
        if chip is None:
            return  # removed while it was checked
        if settled.attachment is not None:
            chip.set_ready(settled.attachment, settled.thumbnail)
            self._warn(chip)
        else:
            chip.set_refused(settled.problem)

    def add_stored(self, attachments: Sequence[Attachment]) -> None:
        """Chips for files stored already (a queued message taken back into the composer)."""
        for attachment in attachments:
            chip = self.chips[self._chip(attachment.name)]
            chip.set_ready(attachment, None)
            self._warn(chip)

    def attachments(self) -> list[Attachment]:
        return [c.attachment for c in self.chips.values()
                if c.state == READY and c.attachment is not None]

    def send_problem(self) -> str | None:
        """Why the message cannot be sent with its chips as they are, or None."""
        if any(c.state == CHECKING for c in self.chips.values()):
            return "Attachments are still being checked; send again in a moment"
        if any(c.state == REFUSED for c in self.chips.values()):
            return "Remove the refused attachments (see their chips) to send"
        return None

    def clear(self) -> None:
        for key in list(self.chips):
            self._remove(key)
        self._say("")

    def restyle(self) -> None:
        self.notice.setStyleSheet(f"color: {theme.css(theme.error_colors()[2])};")
        c = theme.css
        self.button.setStyleSheet(
            f"QToolButton {{ border: 1px solid {c(theme.border())}; border-radius: 8px;"
            f" background: {c(theme.base())}; color: {c(theme.muted_text())}; font-size: 18px; }}"
            f" QToolButton:hover {{ border-color: {c(theme.accent())}; color: {c(theme.text())}; }}")
        for chip in self.chips.values():
            chip.restyle()

    # -- parts ---------------------------------------------------------------------------------
    def _chip(self, name: str) -> str:
        key = f"att-{next(_keys)}"
        chip = AttachmentChip(key, name, self.widget())
        chip.remove_requested.connect(self._remove)
        self.chips[key] = chip
        self._row.insertWidget(self._row.count() - 1, chip)  # before the stretch
        self.show()
        self._fit()
        return key

    def _fit(self) -> None:
        """As tall as a chip, plus the scroll bar when the chips are wider than the pane."""
        widget = self.widget()
        if widget is None:
            return
        inner = widget.sizeHint()
        bar = self.horizontalScrollBar().sizeHint().height()
        wide = sum(c.sizeHint().width() + 6 for c in self.chips.values()) + 24 > self.width()
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded if wide
                                          else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFixedHeight(inner.height() + (bar if wide else 0))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _remove(self, key: str) -> None:
        chip = self.chips.pop(key, None)
        if chip is not None:
            chip.hide()
            self._row.removeWidget(chip)
            chip.deleteLater()
        self.setVisible(bool(self.chips) or self.notice.isVisible())
        self._fit()

    def _say(self, text: str) -> None:
        self.notice.setText(text)
        self.notice.setVisible(bool(text))
        self.restyle()
        self.setVisible(bool(self.chips) or bool(text))


class _EditorFilter(QObject):
    """Paste (the Paste key sequence) and drops of files or images on the composer."""

    def __init__(self, tray: AttachmentTray, editor: QPlainTextEdit) -> None:
        super().__init__(editor)
        self.tray = tray
        editor.installEventFilter(self)
        editor.viewport().installEventFilter(self)
        editor.setAcceptDrops(True)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == QEvent.Type.KeyPress and isinstance(event, QKeyEvent) \
                and event.matches(QKeySequence.StandardKey.Paste):
            mime = QGuiApplication.clipboard().mimeData()
            return mime is not None and self.tray.take_mime(mime)
        if kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove) \
                and isinstance(event, QDragEnterEvent | QDropEvent):
            mime = event.mimeData()
            if _files_of(mime) or mime.hasImage():
                event.acceptProposedAction()
                return True
        if kind == QEvent.Type.Drop and isinstance(event, QDropEvent) \
                and self.tray.take_mime(event.mimeData()):
            event.acceptProposedAction()
            return True
        return False
