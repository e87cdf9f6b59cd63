"""Every screen follows a live theme change: a style sheet made from the palette is made again
after a switch (``theme.follow``), once per change, so no widget keeps the other theme's colours
(muted grey made for light on the dark window, a light panel inside it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import fake_manifest
from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication, QLabel, QLineEdit, QWidget
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, open_preferences, type_into
from ui.test_fanout import add_agent, fan_out, wait_pane_done
from ui.uihelpers import StartApp, save_shot

from tolaria.core.events import Attached
from tolaria.core.limits import RunLimits
from tolaria.core.permissions import PermissionRequest
from tolaria.ui import theme
from tolaria.ui.chat.host_control import InlineEntry
from tolaria.ui.composer.queue_chips import QueuedChips
from tolaria.ui.review.diff_review import FileDiffView
from tolaria.ui.review.turn_changes import TurnChangesRow
from tolaria.ui.settings.custom_agent_dialog import CustomAgentDialog
from tolaria.ui.settings.fields import error_text_color
from tolaria.ui.transcript.cards.attachment_card import AttachmentCard
from tolaria.ui.transcript.permission_card import PermissionCard
from tolaria.ui.usage.usage_window import UsageWindow
from tolaria.ui.window.about import AboutBox
from tolaria.ui.window.chat_limits import ChatLimitsDialog
from tolaria.ui.window.import_report import ImportReportBar
from tolaria.ui.window.palette import CommandPalette

#: Fixed colours both themes use (white text on the accent button).
_BOTH = {"#ffffff", "#000000"}


@pytest.fixture
def live_theme() -> Iterator[None]:
    """A test that switches the theme leaves the application's palette as it found it."""
    yield
    theme.apply_theme("system")


def _colours(name: str) -> set[str]:
    """The colours ``name``'s palette gives the widgets (the helpers of theme.py)."""
    theme.apply_theme(name)
    pal = theme.palette()
    made = [theme.base(), theme.text(), theme.accent(), theme.card_background(), theme.border(),
            theme.muted_text(), theme.code_background(), theme.prompt_background(),
            *theme.error_colors(), theme.warning_color(), theme.success_color(),
            theme.hover_background(), *theme.diff_colors(), error_text_color(),
            pal.placeholderText().color(),
            pal.window().color(), pal.button().color(), pal.alternateBase().color()]
    return {c.name() for c in made} - _BOTH


def _stale(roots: list[QWidget], other: set[str]) -> list[str]:
    """The widgets under ``roots`` whose style sheet still holds a colour of ``other``."""
    found = []
    for root in roots:
        for widget in [root, *root.findChildren(QWidget)]:
            sheet = widget.styleSheet().lower()
            if held := sorted(c for c in other if c in sheet):
                found.append(f"{type(widget).__name__}#{widget.objectName()}: {held}")
    return found


def _ink(widget: QWidget) -> QColor:
    """The colour of ``widget``'s text: of its pixels, the one farthest from its background."""
    image = widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    ground = image.pixelColor(0, 0)

    def far(c: QColor) -> int:
        return sum(abs(a - b) for a, b in zip(_rgb(c), _rgb(ground), strict=True))

    pixels = (image.pixelColor(x, y) for x in range(image.width())
              for y in range(image.height()))
    return max(pixels, key=far)


def _rgb(c: QColor) -> tuple[int, int, int]:
    return c.red(), c.green(), c.blue()


def _near(a: QColor, b: QColor, slack: int = 10) -> bool:
    return all(abs(x - y) <= slack for x, y in zip(_rgb(a), _rgb(b), strict=True))


def test_one_restyle_per_change_and_deleted_widgets_are_forgotten(qtbot: QtBot,
                                                                   live_theme: None) -> None:
    theme.apply_theme("light")
    host = QWidget()
    qtbot.addWidget(host)
    label, gone = QLabel("muted", host), QLabel("gone", host)
    made: list[str] = []

    def sheet() -> str:
        made.append(theme.css(theme.muted_text()))
        return f"color: {made[-1]};"

    theme.follow(label, sheet)
    theme.follow_color(gone, theme.muted_text)
    host.show()
    qtbot.waitExposed(host)
    light_muted = theme.css(theme.muted_text())
    gone.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)
    theme.apply_theme("dark")  # Qt sends the watcher more than one event for it
    dark_muted = theme.css(theme.muted_text())
    assert made == [light_muted, dark_muted], "made once now and once per change"
    assert label.styleSheet() == f"color: {dark_muted};"
    assert gone not in theme._followers  # no hook left for a deleted widget
    theme.apply_theme("dark")  # the same palette again: nothing to make
    assert len(made) == 2
    theme.apply_theme("light")
    assert made[-1] == light_muted and label.styleSheet() == f"color: {light_muted};"


def test_a_palette_the_desktop_sets_is_followed_too(qtbot: QtBot, live_theme: None) -> None:
    theme.apply_theme("light")
    label = QLabel("muted")
    qtbot.addWidget(label)
    theme.follow_color(label, theme.muted_text)
    light_sheet = label.styleSheet()
    QApplication.setPalette(theme.designed_palette("dark"))  # not through apply_theme
    assert theme.is_dark()
    qtbot.waitUntil(lambda: label.styleSheet() == f"color: {theme.css(theme.muted_text())};")
    assert label.styleSheet() != light_sheet


def test_every_screen_follows_a_live_switch(start_app: StartApp, qtbot: QtBot, tmp_path: Path,
                                            live_theme: None) -> None:
    light, dark = _colours("light"), _colours("dark")
    light_only, dark_only = light - dark, dark - light
    drv = start_app()  # built in the theme of the moment (the dark one, left by _colours)
    drv.send("show me some cards")  # the demo agent: text, code and a tool card
    drv.wait_finished()
    add_agent(drv, fake_manifest("normal"))
    view = fan_out(drv, "compare these", ["demo", "fake-normal"])
    for pane in view.panes():
        wait_pane_done(qtbot, pane)
    dialog = open_preferences(drv)
    for index in range(dialog.tabs.count()):  # every page built and shown once
        dialog.tabs.setCurrentIndex(index)
    dialog.tabs.setCurrentWidget(dialog.behaviour)
    type_into(child(dialog, QLineEdit, "attachMaxFileMb"), "lots")  # an error under its field
    error = child(dialog, QLabel, "attachMaxFileError")
    assert not error.isHidden()
    drv.window.sidebar.search.setText("no chat is called this")  # the muted "No chat matches."
    roots: list[QWidget] = [drv.window, dialog, view]
    theme.apply_theme("light")
    assert not _stale(roots, dark_only), "after the switch to light"
    for shot in ("behaviour", "hosts", "mcp", "agents", "shortcuts", "checkpoints"):
        dialog.tabs.setCurrentWidget(getattr(dialog, shot))
        save_shot(dialog, tmp_path, f"prefs-{shot}-light.png")
    for name, other in (("dark", light_only), ("light", dark_only), ("dark", light_only)):
        theme.apply_theme(name)
        assert not _stale(roots, other), f"after the switch to {name}"
    # What the eye sees: the muted and error texts are the dark theme's, on the dark window.
    muted, error_text = theme.muted_text(), error_text_color()
    dialog.tabs.setCurrentWidget(dialog.hosts)
    empty = child(dialog, QLabel, "hostsEmpty")
    qtbot.waitUntil(empty.isVisible)
    assert _near(_ink(empty), muted), _ink(empty).name()
    dialog.tabs.setCurrentWidget(dialog.behaviour)
    assert _near(_ink(error), error_text), _ink(error).name()
    no_match = drv.window.sidebar.no_match
    assert no_match.isVisible()
    assert _near(_ink(no_match), muted), _ink(no_match).name()
    bar = dialog.tabs.tabBar()
    for shot in ("behaviour", "hosts", "mcp", "agents", "shortcuts", "checkpoints"):
        dialog.tabs.setCurrentWidget(getattr(dialog, shot))
        qtbot.waitUntil(lambda: bar.width() >= bar.sizeHint().width())  # no scroll arrows
        save_shot(dialog, tmp_path, f"prefs-{shot}-dark.png")
    save_shot(drv.window, tmp_path, "window-dark.png")
    save_shot(view, tmp_path, "fanout-dark.png")


def test_the_other_screens_follow_too(qtbot: QtBot, live_theme: None) -> None:
    """Screens the walk above does not open (bars, cards, chips, small dialogs), each in the
    state that colours it, through a light -> dark -> light switch."""
    light, dark = _colours("light"), _colours("dark")
    theme.apply_theme("light")
    host = QWidget()
    qtbot.addWidget(host)
    permission = PermissionCard("k1", PermissionRequest(
        stream_id="s", tool_id="t", title="Run ls", input={"command": "ls"}, choices=()), host)
    permission.settle("allow_once")
    entry = InlineEntry(host)
    entry.show_error("No such host")
    widgets: list[QWidget] = [
        host, FileDiffView("src/a.py", host), TurnChangesRow(host), QueuedChips(host),
        ImportReportBar(host), CommandPalette(host), AboutBox(host), CustomAgentDialog(None),
        ChatLimitsDialog(1, "a chat", RunLimits(), RunLimits(), host), UsageWindow(host),
        AttachmentCard(Attached(stream_id="s", name="notes.txt", size=12, mime="text/plain"),
                       host)]
    qtbot.addWidget(widgets[7])  # the custom agent dialog has no parent
    for name, other in (("dark", light - dark), ("light", dark - light)):
        theme.apply_theme(name)
        assert not _stale(widgets, other), f"after the switch to {name}"
