"""A file attached to a turn, in the transcript (ADR 0028): a thumbnail for an image, the name,
the size and how it went to the agent (the ``attached`` event, stored with the turn, so a chat
reopened shows it too); a click on it opens the stored copy, Copy puts it on the clipboard."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QSize, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication, QImageReader, QMouseEvent, QPixmap
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from tolaria.core.attachments.blobs import BlobStore
from tolaria.core.attachments.model import human_size
from tolaria.core.events import Attached
from tolaria.ui import theme
from tolaria.ui.transcript.cards.style import set_tone, small_font

_THUMB = 72


class AttachmentCard(QFrame):
    def __init__(self, event: Attached, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attached = event
        self.setObjectName("attachmentCard")
        self.setAccessibleName(f"Attached {event.name}")
        try:
            self.path: Path | None = BlobStore().path(event.sha256)
        except ValueError:
            self.path = None
        if self.path is not None and not self.path.is_file():
            self.path = None
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 6, 6, 6)
        self.thumb = QLabel(self)
        self.thumb.setFixedSize(_THUMB, _THUMB)
        self.thumb.setAlignment(Qt.AlignmentFlag.AlignCenter)
        if event.mime.startswith("image/") and self.path is not None:
            reader = QImageReader(str(self.path))
            size = reader.size()
            if size.isValid():
                reader.setScaledSize(size.scaled(QSize(_THUMB, _THUMB),
                                                 Qt.AspectRatioMode.KeepAspectRatio))
            image = reader.read()
            if not image.isNull():
                self.thumb.setPixmap(QPixmap.fromImage(image))
        if self.thumb.pixmap().isNull():
            self.thumb.setText(event.name.rpartition(".")[2][:4].upper() if "." in event.name
                               else "FILE")
        self.thumb.setCursor(Qt.CursorShape.PointingHandCursor)
        self.thumb.setToolTip("Open the attached copy" if self.path else "The copy is gone")
        row.addWidget(self.thumb)
        texts = QVBoxLayout()
        name = QLabel(event.name, self)
        name.setTextFormat(Qt.TextFormat.PlainText)
        texts.addWidget(name)
        note = f" · {event.note}" if event.note else ""
        how = QLabel(f"{human_size(event.size)} · sent {event.how}{note}", self)
        how.setTextFormat(Qt.TextFormat.PlainText)
        how.setWordWrap(True)
        how.setFont(small_font(how))
        set_tone(how, "muted")
        texts.addWidget(how)
        row.addLayout(texts, 1)
        self.copy = QToolButton(self)
        self.copy.setText("Copy")
        self.copy.setAutoRaise(True)
        self.copy.setAccessibleName(f"Copy {event.name}")
        self.copy.setEnabled(self.path is not None)
        self.copy.clicked.connect(self.copy_to_clipboard)
        row.addWidget(self.copy, 0, Qt.AlignmentFlag.AlignTop)
        self.restyle()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self.path is not None and self.thumb.geometry().contains(event.position().toPoint()):
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.path)))
        super().mouseReleaseEvent(event)

    def copy_to_clipboard(self) -> None:
        """An image as an image (and the file), a text file as its text, others as the file."""
        if self.path is None:
            return
        mime = QMimeData()
        mime.setUrls([QUrl.fromLocalFile(str(self.path))])
        if self.attached.mime.startswith("image/"):
            mime.setImageData(QImageReader(str(self.path)).read())
        elif self.attached.mime == "text/plain":
            mime.setText(self.path.read_text("utf-8", "replace"))
        QGuiApplication.clipboard().setMimeData(mime)

    def restyle(self) -> None:
        theme.follow(self, _card_css)
        if self.thumb.pixmap().isNull():
            theme.follow(self.thumb, _thumb_css)


def _card_css() -> str:
    return (f"#attachmentCard {{ background: {theme.css(theme.card_background())};"
            f" border: 1px solid {theme.css(theme.border())}; border-radius: 8px; }}")


def _thumb_css() -> str:
    return (f"background: {theme.css(theme.code_background())};"
            f" color: {theme.css(theme.muted_text())}; border-radius: 6px; font-weight: 600;")
