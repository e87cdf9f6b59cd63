"""The messages queued behind a running turn, as chips above the composer.

Each chip can be removed, or taken back into the composer to be edited (sending it again queues
it again). The chips follow the controller's queue (``queue_changed``): a chip disappears the
moment its message is delivered to the agent.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from tolaria.chats.inflight import QueuedMessage
from tolaria.ui import theme

_PREVIEW_CHARS = 120


class QueuedChip(QFrame):
    #: Take this message back into the composer: message id, text.
    edit_requested = Signal(int, str)
    #: Drop this message: message id.
    remove_requested = Signal(int)

    def __init__(self, message: QueuedMessage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("queuedChip")
        self.message = message
        self.setStyleSheet(f"QFrame#queuedChip {{ background: "
                           f"{theme.css(theme.prompt_background())}; border-radius: 6px; }}")
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 2, 4, 2)
        tag = QLabel("queued", self)
        tag.setStyleSheet(f"color: {theme.css(theme.muted_text())};")
        row.addWidget(tag)
        line = " ".join(message.text.split())
        if len(line) > _PREVIEW_CHARS:
            line = line[: _PREVIEW_CHARS - 1] + "…"
        self.label = QLabel(line, self)
        self.label.setObjectName("queuedText")
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        row.addWidget(self.label, 1)
        edit = QPushButton("Edit", self)
        edit.setObjectName("queuedEditButton")
        edit.setToolTip("Take this message back into the composer")
        edit.clicked.connect(lambda: self.edit_requested.emit(message.id, message.text))
        row.addWidget(edit)
        remove = QPushButton("Remove", self)
        remove.setObjectName("queuedRemoveButton")
        remove.setToolTip("Do not send this message")
        remove.clicked.connect(lambda: self.remove_requested.emit(message.id))
        row.addWidget(remove)
        self.setAccessibleName(f"Queued message: {line}")


class QueuedChips(QWidget):
    #: See ``QueuedChip``.
    edit_requested = Signal(int, str)
    #: See ``QueuedChip``.
    remove_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("queuedChips")
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(12, 0, 12, 0)
        self._layout.setSpacing(2)
        self._chips: list[QueuedChip] = []
        self.hide()

    def set_messages(self, messages: Sequence[QueuedMessage]) -> None:
        for chip in self._chips:
            self._layout.removeWidget(chip)
            chip.hide()
            chip.deleteLater()
        self._chips = []
        for message in messages:
            chip = QueuedChip(message, self)
            chip.edit_requested.connect(self.edit_requested)
            chip.remove_requested.connect(self.remove_requested)
            self._layout.addWidget(chip)
            self._chips.append(chip)
        self.setVisible(bool(self._chips))

    def chips(self) -> list[QueuedChip]:
        return list(self._chips)
