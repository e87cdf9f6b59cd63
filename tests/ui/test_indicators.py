"""Check boxes and radios are drawn from the palette, so they show in the dark theme too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox
from pytestqt.qtbot import QtBot

from tolaria.ui import theme


@pytest.mark.parametrize("name", ["light", "dark"])
def test_a_checked_box_shows_a_white_check_on_the_accent(qtbot: QtBot, name: str) -> None:
    theme.apply_theme(name)
    try:
        css = theme.indicator_css()
        image = re.search(r'image: url\("([^"]+)"\)', css)
        assert image is not None and Path(image.group(1)).is_file()  # shipped with the package
        box = QCheckBox("Enabled")
        qtbot.addWidget(box)
        box.setStyleSheet(css)
        box.resize(120, 24)
        shots = []
        for checked in (False, True):
            box.setChecked(checked)
            shots.append(box.grab().toImage())
        ratio = shots[1].devicePixelRatio()

        def colours(index: int) -> set[str]:  # the indicator: the box's first 18 px
            img = shots[index]
            return {QColor(img.pixel(int(x * ratio), int(y * ratio))).name()
                    for x in range(18) for y in range(box.height())}

        accent, white = theme.accent().name(), "#ffffff"
        assert accent not in colours(0)
        assert {accent, white} <= colours(1)  # the accent fill and the check mark
    finally:
        theme.apply_theme("system")


def test_the_fan_out_agent_list_follows_a_live_theme_change(qtbot: QtBot) -> None:
    from tolaria.ui.fanout.fanout_dialog import FanOutDialog

    theme.apply_theme("light")
    try:
        dialog = FanOutDialog()
        qtbot.addWidget(dialog)
        dialog.show()
        qtbot.waitExposed(dialog)
        assert dialog.agents.styleSheet() == theme.indicator_css()
        theme.apply_theme("dark")
        qtbot.waitUntil(lambda: dialog.agents.styleSheet() == theme.indicator_css())
        assert theme.accent().name() in dialog.agents.styleSheet()
        # The list's own background is the dark one (a styled widget keeps its palette unless
        # restyled: the list stayed white before).
        qtbot.waitUntil(lambda: theme.is_dark(dialog.agents.palette()))
    finally:
        theme.apply_theme("system")
