"""The transcript paints from colours and pictures made once per palette (theme.derived): a theme
switch must still repaint every surface, bubble and avatar in the new colours, and a surface drawn
from its cached pieces must look like one drawn whole."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from tolaria.core.events import TextDelta, ToolStart
from tolaria.ui import theme
from tolaria.ui.transcript.cards import style
from tolaria.ui.transcript.turn_view import TurnView
from tolaria.ui.transcript.view import TranscriptView

SID = "ai-agent-stream-paintcache01"


@pytest.fixture
def transcript(qtbot: QtBot) -> Iterator[TranscriptView]:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(700, 600)
    view.show()
    qtbot.waitExposed(view)
    yield view
    theme.apply_theme("system")  # the palette is the application's: leave it as found


def _turn(view: TranscriptView) -> TurnView:
    turn = view.add_turn("show me", "Demo agent", SID)
    for event in (TextDelta(SID, text="Some text.\n\n```sh\nls -la\n```\n"),
                  ToolStart(SID, tool_id="t1", name="Bash", input={"command": "ls"})):
        turn.enqueue(event)
    view.schedule(turn)
    view.flush_all()
    return turn


def _looks(turn: TurnView) -> dict[str, QColor]:
    """Painted pixels: inside a tool card's and a code block's surface, its border, the prompt
    bubble, the user's avatar (its disc, beside the initial)."""
    [card], [code] = turn.tool_cards(), turn.code_blocks()
    bubble = next(w for w in turn.findChildren(QWidget) if w.objectName() == "promptBubble")
    avatar = turn.you.avatar

    def at(widget: QWidget, x: int, y: int) -> QColor:
        image = widget.grab().toImage()
        return image.pixelColor(x if x >= 0 else image.width() + x, y)

    return {"card": at(card, -4, card.height() // 2), "edge": at(card, -1, card.height() // 2),
            "code": at(code, -4, code.height() // 2), "bubble": at(bubble, 4, bubble.height() // 2),
            "avatar": at(avatar, 3, 10)}


def _expected() -> dict[str, QColor]:
    return {"card": theme.card_background(), "edge": theme.border(),
            "code": theme.code_background(), "bubble": theme.prompt_background(),
            "avatar": theme.accent()}


def _close(a: QColor, b: QColor, tolerance: int = 3) -> bool:
    return all(abs(x - y) <= tolerance for x, y in ((a.red(), b.red()), (a.green(), b.green()),
                                                    (a.blue(), b.blue())))


def test_a_theme_switch_repaints_cached_colours(transcript: TranscriptView, qtbot: QtBot) -> None:
    turn = _turn(transcript)
    theme.apply_theme("light")
    qtbot.waitUntil(lambda: _looks(turn)["card"].lightness() > 200)
    light = _looks(turn)
    assert all(_close(light[k], v) for k, v in _expected().items()), (light, _expected())
    theme.apply_theme("dark")  # live: the same widgets, painted from the new palette
    qtbot.waitUntil(lambda: _looks(turn)["card"].lightness() < 80)
    dark = _looks(turn)
    assert all(_close(dark[k], v) for k, v in _expected().items()), (dark, _expected())
    assert all(dark[k] != light[k] for k in light), "every cached look changed"
    theme.apply_theme("light")  # and back: nothing of the dark palette is kept
    qtbot.waitUntil(lambda: _looks(turn)["card"].lightness() > 200)
    assert _looks(turn) == light


def test_the_system_palette_changing_by_itself_is_followed(
        transcript: TranscriptView, qtbot: QtBot) -> None:
    """A palette set without ``apply_theme`` (the desktop's own change) is seen too: the cache
    is keyed by the palette itself."""
    from PySide6.QtWidgets import QApplication

    turn = _turn(transcript)
    theme.apply_theme("light")
    qtbot.waitUntil(lambda: _looks(turn)["card"].lightness() > 200)
    QApplication.setPalette(theme.designed_palette("dark"))
    qtbot.waitUntil(lambda: _looks(turn)["card"].lightness() < 80)
    assert _close(_looks(turn)["code"], theme.code_background())


@pytest.mark.parametrize("name", ["light", "dark"])
@pytest.mark.parametrize("role", ["card", "code", "error", "prompt"])
@pytest.mark.parametrize("radius", [8.0, 10.0])
@pytest.mark.parametrize(("width", "height"), [(19, 19), (23, 40), (640, 57), (41, 300)])
@pytest.mark.parametrize("scale", [1, 2])
def test_a_surface_from_its_pieces_looks_like_one_drawn_whole(
        qtbot: QtBot, name: str, role: str, radius: float, width: int, height: int,
        scale: int) -> None:
    theme.apply_theme(name)
    try:
        tile = style._Tile(role, radius, scale)
        if min(width, height) < tile.size:
            return  # (drawn whole: too small for the pieces)
        images = []
        for pieces in (True, False):
            image = QImage(width * scale, height * scale,
                           QImage.Format.Format_ARGB32_Premultiplied)
            image.setDevicePixelRatio(scale)  # (a HiDPI screen: 2 pixels a point)
            image.fill(theme.base())
            painter = QPainter(image)
            if pieces:
                tile.paint(painter, width, height)
            else:
                fill, edge = style.surface_colors(role)
                style._draw_rounded(painter, fill, edge, width, height, radius)
            painter.end()
            images.append(image)
        corner = tile.corner * scale
        for y in range(height * scale):
            for x in range(width * scale):
                a, b = images[0].pixelColor(x, y), images[1].pixelColor(x, y)
                in_corner = (min(x, width * scale - 1 - x) < corner
                             and min(y, height * scale - 1 - y) < corner)
                # Antialiased corner pixels: composed once more, a rounding apart; all else exact.
                assert _close(a, b, 2 if in_corner else 0), (x, y, a.name(), b.name())
    finally:
        theme.apply_theme("system")
