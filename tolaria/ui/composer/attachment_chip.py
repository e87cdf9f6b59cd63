"""One attachment chip above the composer: a thumbnail (or a file glyph), the name, the size, a
remove button, and its state: checking, ready, or refused with the reason (ADR 0028)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from tolaria.core.attachments.model import Attachment, human_size
from tolaria.ui import theme

CHECKING, READY, REFUSED = "checking", "ready", "refused"
_THUMB = 40


class AttachmentChip(QFrame):
    #: The user removed this chip: its key.
    remove_requested = Signal(str)

    def __init__(self, key: str, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.key = key
        self.name = name
        self.state = CHECKING
        self.attachment: Attachment | None = None
        self.problem = ""
        self.setObjectName("attachmentChip")
        self.setAccessibleName(f"Attachment {name}")
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 4, 4, 4)
        row.setSpacing(6)
        self.thumb = QLabel(self)
        self.thumb.setFixedSize(_THUMB, _THUMB)
        self.thumb.setAlignment(Qt.AlignmentFlag.AlignCenter)
        row.addWidget(self.thumb)
        texts = QVBoxLayout()
        texts.setSpacing(0)
        self.title = QLabel(name, self)
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.detail = QLabel("checking…", self)
        self.detail.setTextFormat(Qt.TextFormat.PlainText)
        for label in (self.title, self.detail):
            label.setMaximumWidth(220)
            texts.addWidget(label)
        row.addLayout(texts)
        self.remove = QToolButton(self)
        self.remove.setText("×")
        self.remove.setAutoRaise(True)
        self.remove.setToolTip(f"Remove {name}")
        self.remove.setAccessibleName(f"Remove {name}")
        self.remove.clicked.connect(lambda: self.remove_requested.emit(self.key))
        row.addWidget(self.remove, 0, Qt.AlignmentFlag.AlignTop)
        self._elide()
        self.restyle()

    def set_ready(self, attachment: Attachment, thumbnail: QImage | None) -> None:
        self.state, self.attachment = READY, attachment
        self.name = attachment.name
        self.detail.setText(f"{human_size(attachment.size)} · "
                            f"{'image' if attachment.is_image else attachment.mime}")
        if thumbnail is not None and not thumbnail.isNull():
            pixmap = QPixmap.fromImage(thumbnail).scaled(
                _THUMB, _THUMB, Qt.AspectRatioMode.KeepAspectRatio,
                Qt.TransformationMode.SmoothTransformation)
            self.thumb.setPixmap(pixmap)
        self.setToolTip(f"{attachment.name}\n{human_size(attachment.size)}, {attachment.mime}")
        self._elide()
        self.restyle()

    def set_refused(self, problem: str) -> None:
        self.state, self.problem = REFUSED, problem
        self.detail.setText(problem)
        self.setToolTip(problem)
        self.setAccessibleDescription(problem)
        self._elide()
        self.restyle()

    def _elide(self) -> None:
        detail = self.problem if self.state == REFUSED else self.detail.text()
        for label, text, mode in ((self.title, self.name, Qt.TextElideMode.ElideMiddle),
                                  (self.detail, detail, Qt.TextElideMode.ElideRight)):
            label.setText(label.fontMetrics().elidedText(text, mode, 220))

    def restyle(self) -> None:
        border = theme.error_colors()[1] if self.state == REFUSED else theme.border()
        self.setStyleSheet(
            f"#attachmentChip {{ background: {theme.css(theme.card_background())};"
            f" border: 1px solid {theme.css(border)}; border-radius: 8px; }}")
        muted = theme.error_colors()[2] if self.state == REFUSED else theme.muted_text()
        self.detail.setStyleSheet(f"color: {theme.css(muted)}; font-size: 11px;")
        if self.thumb.pixmap().isNull():
            # Plain letters, not emoji: every font has them (the file's extension, or a mark).
            suffix = self.name.rpartition(".")[2][:4].upper() if "." in self.name else "FILE"
            glyph = "!" if self.state == REFUSED else "…" if self.state == CHECKING else suffix
            self.thumb.setText(glyph)
            color = theme.error_colors()[2] if self.state == REFUSED else theme.muted_text()
            self.thumb.setStyleSheet(f"background: {theme.css(theme.code_background())};"
                                     f" color: {theme.css(color)}; border-radius: 6px;"
                                     " font-size: 11px; font-weight: 600;")
