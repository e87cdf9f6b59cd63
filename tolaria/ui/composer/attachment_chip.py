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
        #: Why the chat's agent will refuse this chip as it is (an image for an agent that
        #: takes none): said on the chip before Send, not a refusal (another agent may take it).
        self.warning = ""
        self._explained = ""
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

    def _ready_detail(self) -> str:
        attachment = self.attachment
        if attachment is None:
            return "checking…"
        return f"{human_size(attachment.size)} · " \
               f"{'image' if attachment.is_image else attachment.mime}"

    def set_ready(self, attachment: Attachment, thumbnail: QImage | None) -> None:
        self.state, self.attachment = READY, attachment
        self.name = attachment.name
        if thumbnail is not None and not thumbnail.isNull():
            pixmap = QPixmap.fromImage(thumbnail).scaled(
                _THUMB, _THUMB, Qt.AspectRatioMode.KeepAspectRatio,
                Qt.TransformationMode.SmoothTransformation)
            self.thumb.setPixmap(pixmap)
        self._tip()
        self._elide()
        self.restyle()

    def set_warning(self, warning: str, explained: str = "") -> None:
        """``warning``: the chip's short line; ``explained``: its tooltip (empty: none)."""
        if (warning, explained) == (self.warning, self._explained):
            return
        self.warning, self._explained = warning, explained
        self.setAccessibleDescription(explained or warning)
        self._tip()
        self._elide()
        self.restyle()

    def _tip(self) -> None:
        if self.attachment is not None:
            self.setToolTip(self._explained or f"{self.attachment.name}\n"
                            f"{human_size(self.attachment.size)}, {self.attachment.mime}")

    def set_refused(self, problem: str) -> None:
        self.state, self.problem = REFUSED, problem
        self.detail.setText(problem)
        self.setToolTip(problem)
        self.setAccessibleDescription(problem)
        self._elide()
        self.restyle()

    def _elide(self) -> None:
        detail = self.problem if self.state == REFUSED else self.warning or self._ready_detail()
        for label, text, mode in ((self.title, self.name, Qt.TextElideMode.ElideMiddle),
                                  (self.detail, detail, Qt.TextElideMode.ElideRight)):
            label.setText(label.fontMetrics().elidedText(text, mode, 220))

    def restyle(self) -> None:
        warned = self.state != REFUSED and bool(self.warning)
        border = theme.error_colors()[1] if self.state == REFUSED else \
            theme.warning_color() if warned else theme.border()
        self.setStyleSheet(
            f"#attachmentChip {{ background: {theme.css(theme.card_background())};"
            f" border: 1px solid {theme.css(border)}; border-radius: 8px; }}")
        muted = theme.error_colors()[2] if self.state == REFUSED else \
            theme.warning_color() if warned else theme.muted_text()
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
