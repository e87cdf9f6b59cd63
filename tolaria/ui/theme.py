"""Colours and fonts derived from the application palette, so light and dark themes both work.

The palette is the system's (``system``) or one of two designed ones (``light``, ``dark``: the
``[appearance] theme`` setting), applied live with ``apply_theme``. Custom colours (cards, code,
errors) are mixed from the palette when they are needed, never hard-coded for one theme; the
transcript's cards read them at paint time (tolaria/ui/transcript/cards/style.py: no style sheets
on its items), so a palette change needs no rebuild. What is painted every frame is made once per
palette (``derived``: keyed by the palette itself, so any change of it is seen). A style sheet
made from the palette is set with ``follow`` (``follow_color`` for a text colour), never with a
bare ``setStyleSheet``: it is made again after each palette change, a switch here or the
desktop's own (``on_palette_change`` for other restyling).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QIcon, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory, QWidget

from tolaria.config.settings import THEMES
from tolaria.support import paths

__all__ = ["THEMES", "apply_theme"]

T = TypeVar("T")

#: (window, base, alternate base, text, muted text, button, highlight) of the designed themes.
_DESIGNED = {
    "light": ("#f5f5f4", "#ffffff", "#f7f7f6", "#1f2328", "#6b7280", "#f3f3f2", "#2f6feb"),
    "dark": ("#1d1e21", "#17181a", "#202124", "#e4e5e7", "#9ca0a8", "#2a2b2f", "#4c8dff"),
}
_system: tuple[QPalette, str] | None = None


def designed_palette(name: str) -> QPalette:
    window, base, alt, text, muted, button, highlight = (QColor(c) for c in _DESIGNED[name])
    pal = QPalette()
    role = QPalette.ColorRole
    for r, c in ((role.Window, window), (role.Base, base), (role.AlternateBase, alt),
                 (role.Text, text), (role.WindowText, text), (role.ButtonText, text),
                 (role.Button, button), (role.Highlight, highlight),
                 (role.HighlightedText, QColor("#ffffff")), (role.ToolTipBase, alt),
                 (role.ToolTipText, text), (role.PlaceholderText, muted),
                 (role.Link, highlight), (role.LinkVisited, highlight.darker(120)),
                 (role.Mid, mix(base, text, 0.25)), (role.Midlight, mix(base, text, 0.1)),
                 (role.Dark, mix(base, text, 0.45)), (role.Shadow, QColor("#000000")),
                 (role.Light, mix(base, QColor("#ffffff"), 0.5)), (role.BrightText, text)):
        pal.setColor(r, c)
    for r in (role.Text, role.WindowText, role.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, r, muted)
    return pal


def apply_theme(name: str) -> None:
    """Make ``name`` (one of ``THEMES``) the application's palette, now: every widget has the
    new palette, and those that follow it (``follow``, ``on_palette_change``) are restyled,
    when this returns."""
    global _system
    _derived.clear()
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        return
    if name in _DESIGNED:
        if _system is None:  # what the platform gave us: "system" goes back to it
            _system = (QPalette(app.palette()), app.style().name())
        if app.style().name().lower() != "fusion":
            app.setStyle(QStyleFactory.create("Fusion"))  # the one style that follows a palette
        app.setPalette(designed_palette(name))
    elif _system is not None:  # back from a designed theme ("system" alone changes nothing,
        palette_, style = _system  # so the platform's own palette keeps following the desktop)
        _system = None
        if app.style().name() != style:
            app.setStyle(QStyleFactory.create(style))
        app.setPalette(palette_)
    # Qt posts the widgets their ApplicationPaletteChange: delivered now, so that the whole
    # window (palettes, then the style sheets made from them) changes before the next paint.
    _applying[0] = True  # the followers after every widget has its new palette
    try:
        QCoreApplication.sendPostedEvents(None, QEvent.Type.ApplicationPaletteChange.value)
    finally:
        _applying[0] = False
    restyle_followers()


# -- following a theme change ---------------------------------------------------------------
# A style sheet holds colours as text: made for one palette, it keeps them after a switch. So a
# widget whose sheet is made from the palette registers its maker (``follow``), and one watcher
# restyles them all after each palette change, once per change. No per-widget event filter: the
# widgets' own events (paints, keys) pass through no Python.
_Hook = Callable[[QWidget], None]
#: widget -> {name: hook}, for the widgets that follow the palette.
_followers: weakref.WeakKeyDictionary[QWidget, dict[str, _Hook]] = weakref.WeakKeyDictionary()
_followed_key: list[int] = [0]
_watcher: list[QWidget] = []
_registered: list[int] = [0]
_applying: list[bool] = [False]


class _Watcher(QWidget):
    """A hidden window (never shown) that sees each application palette change: Qt sends every
    widget ``ApplicationPaletteChange`` / ``PaletteChange`` when the palette is set, a theme
    switch or the desktop's own."""

    def event(self, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.ApplicationPaletteChange,
                            QEvent.Type.PaletteChange) and not _applying[0]:
            restyle_followers()
        return super().event(event)


def _watch() -> None:
    if not _watcher and QApplication.instance() is not None:
        _watcher.append(_Watcher())
        _followed_key[0] = QGuiApplication.palette().cacheKey()


def on_palette_change(widget: QWidget, hook: Callable[[], None], name: str = "") -> None:
    """Call ``hook`` after each change of the application palette, once per change, until
    ``widget`` is deleted (``name``: the same name replaces the hook). The hook is held as an
    event filter of ``widget`` held it: a widget with no parent that follows the palette lives
    until it is deleted, not until Python drops it."""
    _watch()
    _register(widget, name, lambda _widget: hook())


def follow(widget: QWidget, sheet: Callable[[], str]) -> None:
    """Give ``widget`` the style sheet ``sheet()`` now, and again after each palette change (a
    theme switch): the one way a widget's style sheet holds palette colours. Calling ``follow``
    again replaces ``sheet``; give it what it needs (a colour function), not ``self``."""
    _watch()
    _set_sheet(widget, sheet())
    _register(widget, "sheet", lambda w: _set_sheet(w, sheet()))


def follow_color(widget: QWidget, color: Callable[[], QColor], more: str = "") -> None:
    """``widget``'s text in ``color()`` of the current theme (and ``more`` css), following a
    theme switch: ``follow_color(label, theme.muted_text)``."""
    follow(widget, lambda: f"color: {css(color())};{more}")


def _register(widget: QWidget, name: str, hook: _Hook) -> None:
    hooks = _followers.setdefault(widget, {})
    hooks[name or f"#{len(hooks)}"] = hook
    _registered[0] += 1
    if _registered[0] > max(512, len(_followers)):  # a sweep costs one check per registration
        _registered[0] = 0
        _forget_deleted()


def _set_sheet(widget: QWidget, sheet: str) -> None:
    if widget.styleSheet() != sheet:  # the same text again would re-polish the widget
        widget.setStyleSheet(sheet)


def _alive(widget: QWidget) -> bool:
    try:
        widget.objectName()
    except RuntimeError:  # its C++ object is gone (deleted with its window)
        return False
    return True


def _forget_deleted() -> None:
    for widget in [w for w in list(_followers.keys()) if not _alive(w)]:
        _followers.pop(widget, None)


def restyle_followers() -> None:
    """Restyle every widget that follows the palette, if the palette changed since last time."""
    key = QGuiApplication.palette().cacheKey()
    if key == _followed_key[0]:
        return
    _followed_key[0] = key
    _forget_deleted()
    for widget, hooks in list(_followers.items()):
        for hook in list(hooks.values()):
            hook(widget)


#: Spacing (px) between the blocks of the transcript; the one rhythm every card follows.
SPACING = 10


def palette() -> QPalette:
    return QGuiApplication.palette()


#: Values made from the palette (``derived``), for the palette whose ``cacheKey`` is the key.
_derived: dict[Hashable, Any] = {}
_derived_key: list[int] = [0]


def derived(key: Hashable, make: Callable[[], T]) -> T:
    """``make()``, made once per application palette and kept until the palette changes (a
    theme switch, the desktop's own): what painting needs on every paint (colours, pens,
    pixmaps) without mixing colours again each time. Treat the value as read-only."""
    current = QGuiApplication.palette().cacheKey()
    if current != _derived_key[0]:
        _derived.clear()
        _derived_key[0] = current
    try:
        value: T = _derived[key]
    except KeyError:
        value = _derived[key] = make()
    return value


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


def error_text() -> QColor:
    """The text colour of an error (``error_colors``' foreground)."""
    return error_colors()[2]


def warning_color() -> QColor:
    return mix(text(), QColor(200, 140, 0), 0.7)


def success_color() -> QColor:
    return mix(text(), QColor(40, 160, 80), 0.7)


def css(color: QColor) -> str:
    return color.name()


def hover_background() -> QColor:
    return mix(base(), text(), 0.08)


def diff_colors() -> tuple[QColor, QColor]:
    """(added, removed) line backgrounds of a diff."""
    return mix(base(), QColor(40, 170, 80), 0.16), mix(base(), QColor(220, 50, 47), 0.14)


def mono_font() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def body_point_size() -> float:
    size = QGuiApplication.font().pointSizeF()
    return size if size > 0 else 10.0


def app_icon() -> QIcon:
    return QIcon(str(paths.package_data("resources") / "tolaria.svg"))


def indicator_css() -> str:
    """Check box and radio indicators drawn from the palette: Fusion's own all but vanish on the
    dark palette. A checked box shows a white check mark on the accent colour (as macOS and
    Claude desktop draw it), a checked radio a white dot."""
    accent_, base_, muted, card = (css(c) for c in (accent(), base(), muted_text(),
                                                    card_background()))
    check = (paths.package_data("resources") / "icons" / "check.svg").as_posix()
    dot = ("qradialgradient(cx:0.5, cy:0.5, radius:0.5, fx:0.5, fy:0.5, stop:0 #ffffff,"
           f" stop:0.3 #ffffff, stop:0.4 {accent_}, stop:1 {accent_})")
    return (
        f" QCheckBox::indicator, QRadioButton::indicator, QListView::indicator {{ width: 13px;"
        f" height: 13px; border: 1px solid {muted}; background: {base_}; }}"
        f" QCheckBox::indicator, QListView::indicator {{ border-radius: 3px; }}"
        f" QRadioButton::indicator {{ border-radius: 7px; }}"
        f" QCheckBox::indicator:checked, QListView::indicator:checked {{ background: {accent_};"
        f" border-color: {accent_}; image: url(\"{check}\"); }}"
        f" QRadioButton::indicator:checked {{ background: {dot}; border-color: {accent_}; }}"
        f" QCheckBox::indicator:disabled, QRadioButton::indicator:disabled {{"
        f" background: {card}; }}"
        f" QCheckBox::indicator:checked:disabled {{ background: {muted}; border-color: {muted}; }}"
    )
