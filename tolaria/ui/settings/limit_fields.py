"""The four limit fields (wall time, cost, tokens, tool calls) of Preferences → Behaviour and of
a chat's own limits: each at 0 shows "No limit" (tolaria/core/limits.py)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QDoubleSpinBox, QFormLayout, QSpinBox, QWidget

from tolaria.core.limits import RunLimits

_FIELD_WIDTH = 140


class LimitFields(QWidget):
    """Four spin boxes; ``limits()`` gives what they say (0: no limit of that kind)."""

    #: A value was changed.
    changed = Signal()

    def __init__(self, parent: QWidget | None = None, *, none_text: str = "No limit") -> None:
        super().__init__(parent)
        form = self._form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        self.minutes = QDoubleSpinBox(self)
        self.minutes.setObjectName("limitMinutes")
        self.minutes.setRange(0, 30 * 24 * 60)
        self.minutes.setDecimals(1)
        self.minutes.setSuffix(" min")
        self.cost = QDoubleSpinBox(self)
        self.cost.setObjectName("limitCost")
        self.cost.setRange(0, 1_000_000)
        self.cost.setDecimals(2)
        self.cost.setSingleStep(0.5)
        self.cost.setPrefix("$")
        self.tokens = QSpinBox(self)
        self.tokens.setObjectName("limitTokens")
        self.tokens.setRange(0, 2_000_000_000)
        self.tokens.setSingleStep(10_000)
        self.tokens.setGroupSeparatorShown(True)
        self.tool_calls = QSpinBox(self)
        self.tool_calls.setObjectName("limitToolCalls")
        self.tool_calls.setRange(0, 1_000_000)
        for box, label in ((self.minutes, "Wall time"), (self.cost, "Cost"),
                           (self.tokens, "Tokens"), (self.tool_calls, "Tool calls")):
            box.setSpecialValueText(none_text)  # shown at 0
            box.setFixedWidth(_FIELD_WIDTH)
            box.setAccessibleName(f"{label} limit")
            box.valueChanged.connect(self.changed)
            form.addRow(label, box)

    def hide_time(self) -> None:
        """Without the wall-time row (a fan-out job's budget: time stays per run)."""
        self._form.setRowVisible(0, False)

    def set_limits(self, limits: RunLimits) -> None:
        boxes = (self.minutes, self.cost, self.tokens, self.tool_calls)
        for box in boxes:
            box.blockSignals(True)
        self.minutes.setValue((limits.max_time_s or 0) / 60)
        self.cost.setValue(limits.max_cost_usd or 0)
        self.tokens.setValue(limits.max_tokens or 0)
        self.tool_calls.setValue(limits.max_tool_calls or 0)
        for box in boxes:
            box.blockSignals(False)

    def limits(self) -> RunLimits:
        """What the fields say; 0 stays 0 (no limit: ``RunLimits.effective``)."""
        return RunLimits(round(self.minutes.value() * 60, 3), round(self.cost.value(), 2),
                         self.tokens.value(), self.tool_calls.value())
