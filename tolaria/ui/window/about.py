"""Help → About Tolaria: the app's name, version and what it runs on, in the app's own look.

A QMessageBox underneath (its layout and keyboard handling are right on every platform), but
not the stock one: the theme's flat buttons with Close as the primary action, the version in the
type scale of a heading, and the versions a bug report needs, selectable for copying. Opened with
``open()``, never ``exec()``: no nested event loop under qasync.
"""

from __future__ import annotations

import platform

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import QMessageBox, QWidget

from tolaria import __version__
from tolaria.ui import theme
from tolaria.ui.settings.dialog import preferences_css

TAGLINE = "A desktop chat app for AI coding-agent CLIs where Stop really stops."


def runtime_line() -> str:
    """What Tolaria runs on, as a bug report wants it."""
    return (f"Python {platform.python_version()} · PySide6 {pyside_version} · Qt {qVersion()}"
            f" · {platform.system()} {platform.machine()}")


class AboutBox(QMessageBox):
    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("aboutBox")
        self.setWindowTitle("About Tolaria")
        self.setIconPixmap(parent.windowIcon().pixmap(64, 64))
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setText(f'<div style="font-size: 16px; font-weight: 600;">Tolaria {__version__}'
                     f'</div><div>{TAGLINE}</div>')
        muted = theme.css(theme.muted_text())
        self.setInformativeText(f'<span style="color: {muted};">{runtime_line()}</span>')
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = self.addButton(QMessageBox.StandardButton.Close)
        close.setProperty("primary", True)
        self.setDefaultButton(close)
        self.setEscapeButton(close)
        theme.follow(self, lambda: preferences_css() + f" QMessageBox {{ background: "
                     f"{theme.css(theme.base())}; }}")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
