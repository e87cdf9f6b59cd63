"""The transcript's look, without style sheets on its items.

A style sheet on the transcript (or any ancestor) sends every one of its widgets through Qt's
style-sheet style: measured, building and laying out a turn costs about three times as much, and
a long chat is thousands of widgets over its life. So items are drawn with the palette: cards
paint their own rounded surface (``Surface``, colours read from the theme at paint time, so a
theme change needs no rebuild; drawn from small pieces made once per palette, ``_Tile``), labels carry a ``tone`` (muted, warning, error, success) applied
as a palette colour, and ``retone`` re-applies tones after the palette changes. Style sheets are
kept to single leaf widgets (the Send/Stop buttons, scroll bars).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPaintEvent, QPalette, QPixmap
from PySide6.QtWidgets import QFrame, QLabel, QWidget

from tolaria.ui import theme

#: Tones a widget may carry (``set_tone``); "" is body text.
TONES = ("muted", "warning", "error", "success")
RADIUS = 8.0


def tone_color(tone: str) -> QColor:
    return QColor(theme.derived(("tone", tone), lambda: _tone_color(tone)))


def _tone_color(tone: str) -> QColor:
    colors = {"muted": theme.muted_text, "warning": theme.warning_color,
              "error": theme.error_text, "success": theme.success_color}
    return colors.get(tone, theme.text)()


def set_tone(widget: QWidget, tone: str) -> None:
    """Colour ``widget``'s text (labels, flat buttons) by its role in the current theme."""
    widget.setProperty("tone", tone)
    palette = widget.palette()
    color = tone_color(tone)
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText,
                 QPalette.ColorRole.Text):
        palette.setColor(role, color)
    widget.setPalette(palette)


def retone(root: QWidget) -> None:
    """Tones again after the palette changed (a widget's own palette does not follow it)."""
    for widget in root.findChildren(QWidget):
        tone = widget.property("tone")
        if isinstance(tone, str) and tone:
            set_tone(widget, tone)


def follow_palette(widget: QWidget, restyle: Callable[[], None]) -> None:
    """Run ``restyle`` whenever the application palette changes (the theme was switched), while
    ``widget`` lives: ``theme.on_palette_change``."""
    theme.on_palette_change(widget, restyle)


def small_font(widget: QWidget, *, bold: bool = False) -> QFont:
    font = QFont(widget.font())
    font.setPointSizeF(theme.body_point_size() * 0.88)
    font.setBold(bold)
    return font


def bold_font(widget: QWidget) -> QFont:
    font = QFont(widget.font())
    font.setWeight(QFont.Weight.DemiBold)
    return font


def surface_colors(role: str) -> tuple[QColor, QColor | None]:
    """(fill, border or None) of a surface role."""
    if role == "error":
        background, edge, _ = theme.error_colors()
        return background, edge
    if role == "prompt":
        return theme.prompt_background(), None
    if role == "code":
        return theme.code_background(), theme.border()
    return theme.card_background(), theme.border()


def _draw_rounded(painter: QPainter, fill: QColor, edge: QColor | None, width: int, height: int,
                  radius: float) -> None:
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(fill)
    if edge is None:
        painter.setPen(Qt.PenStyle.NoPen)
    else:
        painter.setPen(edge)
    painter.drawRoundedRect(QRectF(0, 0, width, height).adjusted(0.5, 0.5, -0.5, -0.5),
                            radius, radius)


class _Tile:
    """A surface's rounded rectangle drawn once, small: its corners, one straight column and
    row of its edges, and its fill. Any size of the same surface is these pieces put together
    (the straight parts stretched, the inside filled), the same pixels as drawing it whole but
    for a rounding at the antialiased corners: an antialiased outline of a large card cost
    ~0.4 ms a paint, the pieces a few blits. ``scale``: the screen's (whole) pixel ratio."""

    def __init__(self, role: str, radius: float, scale: int = 1) -> None:
        self.fill, edge = surface_colors(role)
        #: Pixels of each corner (the arc and its antialiasing); the tile is 2 corners + 1.
        self.corner = math.ceil(radius) + 1
        size = 2 * self.corner + 1
        self.size = size
        self.scale = scale
        image = QImage(size * scale, size * scale, QImage.Format.Format_ARGB32_Premultiplied)
        image.setDevicePixelRatio(scale)
        image.fill(0)
        painter = QPainter(image)
        _draw_rounded(painter, self.fill, edge, size, size, radius)
        painter.end()
        self.pixmap = QPixmap.fromImage(image)

    def paint(self, painter: QPainter, width: int, height: int) -> None:
        c, s, pm, k = self.corner, self.size, self.pixmap, self.scale
        inner_w, inner_h = width - 2 * c, height - 2 * c

        def piece(x: int, y: int, w: int, h: int) -> QRect:  # (in the pixmap's own pixels)
            return QRect(x * k, y * k, w * k, h * k)

        for x, sx in ((0, 0), (width - c, s - c)):
            for y, sy in ((0, 0), (height - c, s - c)):
                painter.drawPixmap(QRect(x, y, c, c), pm, piece(sx, sy, c, c))
            painter.drawPixmap(QRect(x, c, c, inner_h), pm, piece(sx, c, c, 1))
        for y, sy in ((0, 0), (height - c, s - c)):
            painter.drawPixmap(QRect(c, y, inner_w, c), pm, piece(c, sy, 1, c))
        painter.fillRect(c, c, inner_w, inner_h, self.fill)


def paint_surface(widget: QWidget, role: str, radius: float = RADIUS) -> None:
    width, height = widget.width(), widget.height()
    painter = QPainter(widget)
    tile_size = 2 * (math.ceil(radius) + 1) + 1
    ratio = widget.devicePixelRatioF()
    if ratio.is_integer() and width >= tile_size and height >= tile_size:
        scale = int(ratio)
        tile = theme.derived(("surface", role, radius, scale), lambda: _Tile(role, radius, scale))
        tile.paint(painter, width, height)
    else:  # (a fractional screen scale: pieces would meet at fractions of a pixel)
        fill, edge = surface_colors(role)
        _draw_rounded(painter, fill, edge, width, height, radius)
    painter.end()


class Surface(QFrame):
    """A rounded card drawn in the colours of ``role`` (card, code, error)."""

    def __init__(self, role: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.role = role

    def paintEvent(self, event: QPaintEvent) -> None:
        paint_surface(self, self.role)
        super().paintEvent(event)


class Bubble(QLabel):
    """The user's prompt on a soft accent surface (plain text, never markup of the prompt's)."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setContentsMargins(12, 8, 12, 8)
        self.plain = text

    def highlight(self, needle: str) -> None:
        """Mark every occurrence of ``needle`` (a search match, any case) in the prompt. The
        prompt is escaped, so the only markup is the marks themselves."""
        spans = find_all(self.plain, needle)
        if not spans:
            self.setTextFormat(Qt.TextFormat.PlainText)
            self.setText(self.plain)
            return
        color = theme.accent()
        color.setAlpha(90)
        mark = f'<span style="background-color: {color.name(QColor.NameFormat.HexArgb)}">'
        parts, at = [], 0
        for start, end in spans:
            parts += [html.escape(self.plain[at:start]), mark, html.escape(self.plain[start:end]),
                      "</span>"]
            at = end
        parts.append(html.escape(self.plain[at:]))
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setText(f'<p style="white-space: pre-wrap">{"".join(parts)}</p>')

    def paintEvent(self, event: QPaintEvent) -> None:
        paint_surface(self, "prompt", 10.0)
        super().paintEvent(event)


def find_all(text: str, needle: str, limit: int = 200) -> list[tuple[int, int]]:
    """Where ``needle`` occurs in ``text`` ignoring case, as (start, end), at most ``limit``."""
    if not needle:
        return []
    folded, wanted = text.casefold(), needle.casefold()
    if len(folded) != len(text):  # a character that folds to several: no safe offsets
        folded, wanted = text.lower(), needle.lower()
        if len(folded) != len(text):
            return []
    spans: list[tuple[int, int]] = []
    at = folded.find(wanted)
    while at >= 0 and len(spans) < limit:
        spans.append((at, at + len(wanted)))
        at = folded.find(wanted, at + len(wanted))
    return spans


def pane_button_css(kind: str) -> str:
    """The chat pane's Send (accent), Stop and Restart buttons: flat and themed."""
    c = theme.css
    border, accent, base, text = (c(theme.border()), c(theme.accent()), c(theme.base()),
                                  c(theme.text()))
    if kind == "send":
        return (f"QPushButton {{ background: {accent}; border: 1px solid {accent}; color: #ffffff;"
                f" border-radius: 8px; padding: 4px 14px; font-weight: 600; }}"
                f" QPushButton:hover {{ background: {c(theme.accent().lighter(112))}; }}")
    edge = c(theme.error_colors()[1]) if kind == "stop" else border
    weight = "font-weight: 600;" if kind == "stop" else ""
    return (f"QPushButton {{ background: {base}; border: 1px solid {edge}; color: {text};"
            f" border-radius: 8px; padding: 4px 14px; {weight} }}"
            f" QPushButton:hover {{ border-color: {accent}; }}")


def flat_button_css() -> str:
    """Buttons of the window around the chat (New chat, the working folder)."""
    c = theme.css
    return (f"QPushButton {{ border: 1px solid {c(theme.border())}; border-radius: 7px;"
            f" padding: 4px 12px; background: {c(theme.base())}; color: {c(theme.text())}; }}"
            f" QPushButton:hover {{ background: {c(theme.hover_background())}; }}")


def thin_scrollbar_css(orientation: Qt.Orientation = Qt.Orientation.Vertical) -> str:
    """A thin scroll bar without arrows (set on the scroll bar itself, nothing else)."""
    border, muted = theme.css(theme.border()), theme.css(theme.muted_text())
    o, size, extent, line = (("vertical", "width", "min-height", "height")
                             if orientation == Qt.Orientation.Vertical
                             else ("horizontal", "height", "min-width", "width"))
    return f"""
QScrollBar:{o} {{ {size}: 10px; background: transparent; margin: 2px; }}
QScrollBar::handle:{o} {{ background: {border}; border-radius: 3px; {extent}: 40px; }}
QScrollBar::handle:{o}:hover {{ background: {muted}; }}
QScrollBar::add-line:{o}, QScrollBar::sub-line:{o} {{ {line}: 0; border: none; }}
QScrollBar::add-page:{o}, QScrollBar::sub-page:{o} {{ background: none; }}
"""


def scrollbar_css() -> str:
    return thin_scrollbar_css(Qt.Orientation.Vertical)
