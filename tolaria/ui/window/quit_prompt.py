""""Stop and quit?" when runs are still going: the count is live, never a stale number.

The box re-reads the number of running chats whenever a run starts or ends while it is shown, so
it never says "2 chats are still running" after they finished; with nothing left running it
offers a plain Quit. No warning icon: it is a question, not an error.

A chat that keeps running on its host when disconnected (ADR 0032) is not stopped by a quit:
the box names it as going on there, taken back at the next start; with only such runs live it
asks a plain "Quit?" (Quit the default) that says where they go on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget

from tolaria.ui import theme
from tolaria.ui.settings.dialog import preferences_css

STOPPED = "Every running agent and the processes it started are stopped."


def quit_css() -> str:
    """Preferences' look (rounded buttons, the default one in the accent colour), the question
    in bold and its explanation muted, as Claude desktop and Zed ask before quitting."""
    c = theme.css
    accent = c(theme.accent())
    return (preferences_css()
            + f" QMessageBox {{ background: {c(theme.base())}; }}"
            + " QLabel#qt_msgbox_label { font-weight: 600; }"
            + f" QLabel#qt_msgbox_informativelabel {{ color: {c(theme.muted_text())}; }}"
            + " QPushButton { min-width: 72px; padding: 5px 14px; }"
            + f" QPushButton:default {{ background: {accent}; border-color: {accent};"
            + " color: #ffffff; font-weight: 600; }")


def running_sentence(running: int) -> str:
    if running <= 0:
        return "No chat is running any more."
    chats = "1 chat is" if running == 1 else f"{running} chats are"
    return f"{chats} still running. Stop and quit?"


def kept_sentence(hosts: Sequence[str], *, more: bool) -> str:
    """Where the kept runs go on, one host per run: "1 more keeps running on devbox and is
    taken back at the next start." after the runs a quit stops (``more``), else "1 chat keeps
    running on devbox."."""
    count = len(hosts)
    by_host = Counter(hosts)
    where = " and ".join(sorted(by_host)) if len(by_host) <= 3 else f"{len(by_host)} hosts"
    if not more:
        chats = "1 chat keeps" if count == 1 else f"{count} chats keep"
        return f"{chats} running on {where}."
    chats = "1 more keeps" if count == 1 else f"{count} more keep"
    taken = "is" if count == 1 else "are"
    return f"{chats} running on {where} and {taken} taken back at the next start."


def stopped_sentence(stopped: int) -> str:
    """What a quit stops, when some runs are kept."""
    return ("Its agent and the processes it started are stopped." if stopped == 1 else
            "Their agents and the processes they started are stopped.")


def only_kept_info(kept: int) -> str:
    return ("It is taken back at the next start; stop it first to end it there." if kept == 1
            else "They are taken back at the next start; stop them first to end them there.")


class QuitPrompt:
    """Owns the one quit box of a window; ``count`` (every running chat) and ``kept`` (the
    host of each run a quit leaves running there) are asked again at every refresh."""

    def __init__(self, parent: QWidget, count: Callable[[], int],
                 on_quit: Callable[[], None],
                 kept: Callable[[], Sequence[str]] = lambda: ()) -> None:
        self._parent = parent
        self._count = count
        self._kept = kept
        self._on_quit = on_quit
        self.box: QMessageBox | None = None
        self._quit_button: QPushButton | None = None

    def ask(self) -> None:
        if self.box is not None:
            self.refresh()
            return
        box = QMessageBox(QMessageBox.Icon.NoIcon, "Quit Tolaria", "", parent=self._parent)
        box.setObjectName("quitDialog")
        theme.follow(box, quit_css)
        box.setInformativeText(STOPPED)
        quit_button = box.addButton("Stop and Quit", QMessageBox.ButtonRole.AcceptRole)
        quit_button.setObjectName("quitConfirmButton")
        box.addButton(QMessageBox.StandardButton.Cancel)
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
        box, quit_button = self.box, self._quit_button
        if box is None or quit_button is None:
            return
        kept = list(self._kept())
        stopped = max(self._count() - len(kept), 0)
        if stopped:
            text, info, button = running_sentence(stopped), STOPPED, "Stop and Quit"
            if kept:
                info = f"{stopped_sentence(stopped)} {kept_sentence(kept, more=True)}"
        elif kept:
            text = f"Quit? {kept_sentence(kept, more=False)}"
            info, button = only_kept_info(len(kept)), "Quit"
        else:
            text, button = running_sentence(0), "Quit"
            info = "Their runs ended while this question was open."
        box.setText(text)
        box.setInformativeText(info)
        quit_button.setText(button)
        # Quit is the default when a quit stops nothing and leaves runs going; else Cancel.
        if kept and not stopped:
            box.setDefaultButton(quit_button)
        else:
            box.setDefaultButton(QMessageBox.StandardButton.Cancel)
