"""Preferences → Behaviour → Notifications: the desktop notifications, one switch per kind.

The master switch (``[behaviour] notify_background``) turns them all off; under it each kind
(``[notifications]``, ADR 0030) and how long a run may be silent before it counts as stalled.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QHBoxLayout, QVBoxLayout, QWidget

from tolaria.chats.notify.notices import KIND_LABELS, KINDS, STALL
from tolaria.config.settings import Settings


class NotifyFields(QWidget):
    #: A value was changed.
    changed = Signal()
    #: What the fields do, shown under them by the page (its rows' own hint style).
    HINT = ("Through the desktop's notifications (the system tray where there are none); never "
            "for the chat in view, one at a time per chat. Waiting questions are counted on the "
            "window's title and the launcher.")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 6)
        column.setSpacing(4)
        self.master = QCheckBox("Notify me about chats I am not looking at", self)
        self.master.setObjectName("notifyBackground")
        self.master.toggled.connect(self._on_master_toggled)
        column.addWidget(self.master)
        self.kinds: dict[str, QCheckBox] = {}
        for kind in KINDS:
            box = QCheckBox(KIND_LABELS[kind], self)
            box.setObjectName(f"notify_{kind}")
            box.toggled.connect(self.changed)
            self.kinds[kind] = box
            row = QHBoxLayout()
            row.setContentsMargins(22, 0, 0, 0)
            row.addWidget(box)
            if kind == STALL:
                self.stall_minutes = QDoubleSpinBox(self)
                self.stall_minutes.setObjectName("notifyStallMinutes")
                self.stall_minutes.setRange(0.5, 1440.0)
                self.stall_minutes.setDecimals(1)
                self.stall_minutes.setSingleStep(1.0)
                self.stall_minutes.setPrefix("after ")
                self.stall_minutes.setSuffix(" min")
                self.stall_minutes.setFixedWidth(130)
                self.stall_minutes.valueChanged.connect(self.changed)
                row.addWidget(self.stall_minutes)
            row.addStretch(1)
            column.addLayout(row)

    def widgets(self) -> tuple[QWidget, ...]:
        return (self.master, self.stall_minutes, *self.kinds.values())

    def set_settings(self, settings: Settings) -> None:
        self.master.setChecked(settings.notify_background)
        on = settings.notify_kinds()
        for kind, box in self.kinds.items():
            box.setChecked(kind in on)
        self.stall_minutes.setValue(settings.notify_stall_minutes)
        self._enable(settings.notify_background)

    def apply(self, settings: Settings) -> Settings:
        values: dict[str, object] = {f"notify_{kind}": box.isChecked()
                                     for kind, box in self.kinds.items()}
        return replace(settings, notify_background=self.master.isChecked(),
                       notify_stall_minutes=float(self.stall_minutes.value()),
                       **values)  # type: ignore[arg-type]

    def _enable(self, on: bool) -> None:
        for box in self.kinds.values():
            box.setEnabled(on)
        self.stall_minutes.setEnabled(on)

    def _on_master_toggled(self, on: bool) -> None:
        self._enable(on)
        self.changed.emit()
