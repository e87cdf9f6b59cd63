"""The plans' rate limits on the Usage page as bars, one a window ("Codex · 5-hour", how much is
used, when it resets), as Claude desktop shows a plan's usage; drawn with QPainter."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QWidget

from tolaria.ui import theme

_ROW, _BAR_H, _CAPTION_W, _BAR_W = 24, 6, 200, 220


@dataclass(frozen=True)
class LimitRow:
    caption: str
    #: 0..1, or None when the CLI said when it resets but not how much is used.
    used: float | None
    detail: str
    reached: bool = False


class LimitBars(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("usageLimitBars")
        self.rows: list[LimitRow] = []

    def set_rows(self, rows: list[LimitRow]) -> None:
        self.rows = rows
        self.setVisible(bool(rows))
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(_CAPTION_W + _BAR_W + 260, max(1, len(self.rows)) * _ROW)

    def minimumSizeHint(self) -> QSize:
        return QSize(_CAPTION_W + _BAR_W, len(self.rows) * _ROW)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        middle = int(Qt.AlignmentFlag.AlignVCenter)
        for index, row in enumerate(self.rows):
            top = index * _ROW
            painter.setPen(theme.text())
            painter.drawText(QRectF(0, top, _CAPTION_W - 12, _ROW),
                             middle | int(Qt.AlignmentFlag.AlignLeft), row.caption)
            bar = QRectF(_CAPTION_W, top + (_ROW - _BAR_H) / 2, _BAR_W, _BAR_H)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(theme.mix(theme.base(), theme.text(), 0.14))
            painter.drawRoundedRect(bar, _BAR_H / 2, _BAR_H / 2)
            if row.used:
                used = min(1.0, max(0.0, row.used))
                color = (theme.error_colors()[2] if row.reached or used >= 0.95
                         else theme.warning_color() if used >= 0.8 else theme.accent())
                painter.setBrush(color)
                painter.drawRoundedRect(QRectF(bar.left(), bar.top(),
                                               max(_BAR_H, _BAR_W * used), _BAR_H),
                                        _BAR_H / 2, _BAR_H / 2)
            painter.setPen(theme.muted_text())
            painter.drawText(QRectF(_CAPTION_W + _BAR_W + 12, top,
                                    self.width() - _CAPTION_W - _BAR_W - 12, _ROW),
                             middle | int(Qt.AlignmentFlag.AlignLeft), row.detail)
        painter.end()
