"""The Behaviour page: how stops and the no-output watchdog behave, quitting, notifications, the
limits that stop runs, and the theme (applied and kept at once, like View → Theme, not on Save)."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from tolaria.config.settings import THEMES, Settings
from tolaria.ui import theme
from tolaria.ui.settings.attachment_fields import AttachmentFields
from tolaria.ui.settings.fields import scrolled
from tolaria.ui.settings.limit_fields import LimitFields
from tolaria.ui.settings.notify_fields import NotifyFields

_FIELD_WIDTH = 140
_THEME_LABELS = {"system": "System", "light": "Light", "dark": "Dark"}


def _with_hint(field: QWidget | QHBoxLayout, text: str, parent: QWidget) -> QWidget:
    """The field at its natural width, its explanation right under it."""
    box = QWidget(parent)
    column = QVBoxLayout(box)
    column.setContentsMargins(0, 0, 0, 6)
    column.setSpacing(2)
    row = QHBoxLayout()
    if isinstance(field, QHBoxLayout):
        row.addLayout(field)
    else:
        row.addWidget(field)
    row.addStretch(1)
    column.addLayout(row)
    label = QLabel(text, box)
    label.setWordWrap(True)
    theme.follow_color(label, theme.muted_text)
    column.addWidget(label)
    return box


class BehaviourPage(QWidget):
    #: A value was changed.
    changed = Signal()
    #: The user picked a theme: "system", "light" or "dark" (to apply and keep now).
    theme_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("behaviourPage")
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        body = QWidget(self)  # a long form: it scrolls rather than squeezing its rows
        layout = QVBoxLayout(body)
        form = QFormLayout()
        layout.addLayout(form)
        scroll = scrolled(body, self)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        outer.addWidget(scroll)
        self.grace = QDoubleSpinBox(self)
        self.grace.setObjectName("graceSeconds")
        self.grace.setRange(0.1, 60.0)
        self.grace.setSingleStep(0.5)
        self.grace.setSuffix(" s")
        self.grace.valueChanged.connect(self.changed)
        self.grace.setFixedWidth(_FIELD_WIDTH)
        form.addRow("Stop grace period", _with_hint(
            self.grace, "After Stop, how long the agent's processes get to exit after SIGTERM "
                        "before they are killed (SIGKILL).", self))
        polite_row = QHBoxLayout()
        self.polite_own = QCheckBox("Each agent's own", self)
        self.polite_own.setObjectName("politeWindowDefault")
        self.polite_own.toggled.connect(self._on_polite_own_toggled)
        self.polite = QSpinBox(self)
        self.polite.setObjectName("politeWindowMs")
        self.polite.setRange(0, 60_000)
        self.polite.setSingleStep(100)
        self.polite.setSuffix(" ms")
        self.polite.valueChanged.connect(self.changed)
        self.polite.setFixedWidth(_FIELD_WIDTH)
        polite_row.addWidget(self.polite_own)
        polite_row.addWidget(self.polite)
        form.addRow("Polite-stop window", _with_hint(
            polite_row, "How long an agent may take to stop when asked nicely (Ctrl+C, its "
                        "protocol's cancel) before the whole tree is stopped.", self))
        self.watchdog = QDoubleSpinBox(self)
        self.watchdog.setObjectName("watchdogSeconds")
        self.watchdog.setRange(5.0, 3600.0)
        self.watchdog.setSingleStep(5.0)
        self.watchdog.setSuffix(" s")
        self.watchdog.valueChanged.connect(self.changed)
        self.watchdog.setFixedWidth(_FIELD_WIDTH)
        form.addRow("No-output notice after", _with_hint(
            self.watchdog, "A running turn silent this long offers to restart it (it never "
                           "restarts by itself).", self))
        self.confirm_quit = QCheckBox("Ask before quitting while chats are running", self)
        self.confirm_quit.setObjectName("confirmQuit")
        self.confirm_quit.toggled.connect(self.changed)
        form.addRow("Quit", self.confirm_quit)
        self.notify = NotifyFields(self)
        self.notify.changed.connect(self.changed)
        form.addRow("Notifications", _with_hint(self.notify, NotifyFields.HINT, self))
        self.theme = QComboBox(self)
        self.theme.setObjectName("themeChoice")
        for name in THEMES:
            self.theme.addItem(_THEME_LABELS[name], name)
        self.theme.setFixedWidth(_FIELD_WIDTH)
        self.theme.currentIndexChanged.connect(self._on_theme_current_index_changed)
        form.addRow("Theme", _with_hint(
            self.theme, "The window's colours. Applied and kept at once, like View → Theme.",
            self))
        self.limits = LimitFields(self)
        self.limits.setObjectName("runLimits")
        self.limits.changed.connect(self.changed)
        form.addRow("Limits per run", _with_hint(
            self.limits, "A run that reaches one is stopped (its answer so far kept) and the "
                         "turn says which; a warning at 80 %. A chat's own limits and tolaria "
                         "run --max-* override these.", self))
        self.attachments = AttachmentFields(self)
        self.attachments.setObjectName("attachmentCaps")
        self.attachments.changed.connect(self.changed)
        form.addRow("Attachments", _with_hint(
            self.attachments, "The most one attached file, and all the files of one chat "
                              "(each counted once), may take. Also for the images of imported "
                              "sessions.", self))
        layout.addStretch(1)

    def _fields(self) -> tuple[QWidget, ...]:
        return (self.grace, self.polite, self.polite_own, self.watchdog, self.confirm_quit,
                *self.notify.widgets(), self.theme)

    def set_settings(self, settings: Settings) -> None:
        for widget in self._fields():
            widget.blockSignals(True)
        self.grace.setValue(settings.grace_seconds)
        own = settings.polite_window_ms is None
        self.polite_own.setChecked(own)
        self.polite.setValue(settings.polite_window_ms or 1000)
        self.polite.setEnabled(not own)
        self.watchdog.setValue(settings.watchdog_seconds)
        self.confirm_quit.setChecked(settings.confirm_quit)
        self.notify.set_settings(settings)
        self.theme.setCurrentIndex(max(0, self.theme.findData(settings.theme)))
        self.limits.set_limits(settings.run_limits())
        self.attachments.set_settings(settings)
        for widget in self._fields():
            widget.blockSignals(False)

    def is_valid(self) -> bool:
        """False while a field says what is wrong with it (Save waits)."""
        return self.attachments.is_valid()

    def apply(self, settings: Settings) -> Settings:
        limits = self.limits.limits()
        return replace(
            self.attachments.apply(self.notify.apply(settings)), grace_seconds=float(self.grace.value()),
            polite_window_ms=None if self.polite_own.isChecked() else int(self.polite.value()),
            watchdog_seconds=float(self.watchdog.value()),
            confirm_quit=self.confirm_quit.isChecked(),
            theme=str(self.theme.currentData()),
            limit_time_seconds=float(limits.max_time_s or 0),
            limit_cost_usd=float(limits.max_cost_usd or 0),
            limit_tokens=int(limits.max_tokens or 0),
            limit_tool_calls=int(limits.max_tool_calls or 0))

    def _on_polite_own_toggled(self, own: bool) -> None:
        self.polite.setEnabled(not own)
        self.changed.emit()

    def _on_theme_current_index_changed(self, _index: int) -> None:
        self.theme_chosen.emit(str(self.theme.currentData()))
