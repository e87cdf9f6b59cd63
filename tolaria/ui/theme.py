"""Colours and fonts derived from the system palette, so light and dark themes both work.

Widgets use Qt's native style; the few custom colours (cards, code, errors) are mixed from the
palette at the moment they are needed, never hard-coded for one theme.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QIcon, QPalette

from tolaria.support import paths

#: Spacing (px) between the blocks of the transcript; the one rhythm every card follows.
SPACING = 10


def palette() -> QPalette:
    return QGuiApplication.palette()


def is_dark(pal: QPalette | None = None) -> bool:
    pal = pal or palette()
    return pal.color(QPalette.ColorRole.Window).lightness() < 128


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """``a`` moved ``t`` (0..1) of the way towards ``b``."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )


def base() -> QColor:
    return palette().color(QPalette.ColorRole.Base)


def text() -> QColor:
    return palette().color(QPalette.ColorRole.Text)


def accent() -> QColor:
    return palette().color(QPalette.ColorRole.Highlight)


def card_background() -> QColor:
    return mix(base(), text(), 0.04)


def border() -> QColor:
    return mix(base(), text(), 0.18)


def muted_text() -> QColor:
    return mix(text(), base(), 0.4)


def code_background() -> QColor:
    return mix(base(), text(), 0.07)


def prompt_background() -> QColor:
    return mix(base(), accent(), 0.12)


def error_colors() -> tuple[QColor, QColor, QColor]:
    """(background, border, foreground) of an error card."""
    red = QColor(220, 50, 47)
    return mix(base(), red, 0.14), mix(base(), red, 0.6), mix(text(), red, 0.35)


def warning_color() -> QColor:
    return mix(text(), QColor(200, 140, 0), 0.7)


def success_color() -> QColor:
    return mix(text(), QColor(40, 160, 80), 0.7)


def css(color: QColor) -> str:
    return color.name()


def mono_font() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def app_icon() -> QIcon:
    return QIcon(str(paths.package_data("resources") / "tolaria.svg"))
