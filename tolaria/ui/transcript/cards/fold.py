"""A header row with a disclosure button, and a body shown in place when expanded."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QToolButton, QVBoxLayout, QWidget

CLOSED, OPEN = "▸", "▾"


class Collapsible(QWidget):
    """The disclosure is a flat text button (no platform arrow icons); the body is built by
    subclasses when first expanded (``on_expanded``), so a collapsed card costs little."""

    #: The user opened or closed it: the transcript keeps what is above in place.
    expanded_changed = Signal(bool)

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(2)
        self.header = QHBoxLayout()
        self.header.setSpacing(6)
        self.toggle = QToolButton(self)
        self.toggle.setObjectName("disclosure")
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.toggle.setAutoRaise(True)
        self.toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self._title = title
        self.toggle.setText(f"{CLOSED} {title}")
        # Not a checkable button: a checked one is drawn pressed in, like a stock toolbar.
        self._open = False
        self.toggle.clicked.connect(self._on_toggle_clicked)
        self.header.addWidget(self.toggle)
        outer.addLayout(self.header)
        self.body = QWidget(self)
        self.body_layout = QVBoxLayout(self.body)
        self.body_layout.setContentsMargins(18, 0, 0, 4)
        self.body_layout.setSpacing(4)
        self.body.hide()
        outer.addWidget(self.body)

    @property
    def title(self) -> str:
        return self._title

    def set_title(self, title: str) -> None:
        self._title = title
        self.toggle.setText(f"{OPEN if self.expanded else CLOSED} {title}".rstrip())

    @property
    def expanded(self) -> bool:
        return self._open

    def set_expanded(self, on: bool) -> None:
        if on != self._open:
            self._on_toggle_clicked()

    def _on_toggle_clicked(self) -> None:
        self._open = on = not self._open
        self.set_title(self._title)
        if on:
            self.on_expanded()
        self.body.setVisible(on)
        self.expanded_changed.emit(on)

    def on_expanded(self) -> None:
        """Subclasses fill the body lazily."""
