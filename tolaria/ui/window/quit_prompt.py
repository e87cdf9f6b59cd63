""""Stop and quit?" when runs are still going: the count is live, never a stale number.

The box re-reads the number of running chats whenever a run starts or ends while it is shown, so
it never says "2 chats are still running" after they finished; with nothing left running it
offers a plain Quit. No warning icon: it is a question, not an error.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget


def running_sentence(running: int) -> str:
    if running <= 0:
        return "No chat is running any more."
    chats = "1 chat is" if running == 1 else f"{running} chats are"
    return f"{chats} still running. Stop and quit?"


class QuitPrompt:
    """Owns the one quit box of a window; ``count`` is asked again at every refresh."""

    def __init__(self, parent: QWidget, count: Callable[[], int],
                 on_quit: Callable[[], None]) -> None:
        self._parent = parent
        self._count = count
        self._on_quit = on_quit
        self.box: QMessageBox | None = None
        self._quit_button: QPushButton | None = None

    def ask(self) -> None:
        if self.box is not None:
            self.refresh()
            return
        box = QMessageBox(QMessageBox.Icon.NoIcon, "Quit Tolaria", "", parent=self._parent)
        box.setObjectName("quitDialog")
        box.setInformativeText("Every running agent and the processes it started are stopped.")
        quit_button = box.addButton("Stop and Quit", QMessageBox.ButtonRole.AcceptRole)
        quit_button.setObjectName("quitConfirmButton")
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def on_finished(_result: int) -> None:
            self.box = self._quit_button = None
            if box.clickedButton() is quit_button:
                self._on_quit()

        box.finished.connect(on_finished)
        self.box, self._quit_button = box, quit_button
        self.refresh()
        box.open()

    def refresh(self) -> None:
        """Say the number of running chats as it is now."""
        if self.box is None or self._quit_button is None:
            return
        running = self._count()
        self.box.setText(running_sentence(running))
        self.box.setInformativeText(
            "Every running agent and the processes it started are stopped." if running
            else "Their runs ended while this question was open.")
        self._quit_button.setText("Stop and Quit" if running else "Quit")
