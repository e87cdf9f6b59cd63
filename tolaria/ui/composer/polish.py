"""Small things the composer does besides sending (issue 26 item 6): Up recalls the earlier
prompts while it is empty, Ctrl+Shift+V pastes the clipboard as plain text, and a line under it
shows the prompt's size once it nears what one argv element can hold."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QGuiApplication, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QWidget

from tolaria.chats.history import ARG_MARGIN_BYTES, MAX_ARG_STRLEN, utf8_len
from tolaria.ui import theme

PLAIN_PASTE = "Ctrl+Shift+V"
#: The budget shows from this share of what one argument can hold.
BUDGET_FROM = 0.5
#: What a prompt may take of one argv element (the rest: the command's own text around it).
PROMPT_BYTES = MAX_ARG_STRLEN - ARG_MARGIN_BYTES


class ComposerKeys(QObject):
    """Up / Down through the earlier prompts (newest first) while the composer is empty or
    shows an unchanged recalled prompt; Ctrl+Shift+V as plain text."""

    def __init__(self, composer: QPlainTextEdit, prompts: Callable[[], Sequence[str]]) -> None:
        super().__init__(composer)
        self._composer = composer
        self._prompts = prompts
        #: Which prompt is shown (0 = the newest), None when the user's own text is.
        self._at: int | None = None
        self._shown = ""
        composer.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is not self._composer or event.type() != QEvent.Type.KeyPress:
            return False
        assert isinstance(event, QKeyEvent)
        if QKeySequence(event.keyCombination()) == QKeySequence(PLAIN_PASTE):
            self.paste_plain()
            return True
        if event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            return False
        if event.key() == Qt.Key.Key_Up:
            return self._step(1)
        if event.key() == Qt.Key.Key_Down:
            return self._step(-1)
        return False

    def paste_plain(self) -> None:
        """The clipboard's text, as text (no file list, image or formatting taken from it)."""
        text = QGuiApplication.clipboard().text()
        if text:
            self._composer.insertPlainText(text)

    def _step(self, by: int) -> bool:
        text = self._composer.toPlainText()
        recalled = self._at is not None and text == self._shown
        if text and not recalled:
            self._at = None
            return False
        if by < 0 and not recalled:
            return False
        prompts = [p for p in reversed(self._prompts()) if p.strip()]
        at = (-1 if self._at is None or not recalled else self._at) + by
        if at >= len(prompts):
            return True  # the oldest is shown already
        if at < 0:
            self._at = None
            self._shown = ""
            self._composer.clear()
            return True
        self._at = at
        self._shown = prompts[at]
        self._composer.setPlainText(self._shown)
        self._composer.moveCursor(self._composer.textCursor().MoveOperation.End)
        return True


def budget_text(text: str) -> tuple[str, bool]:
    """The line under the composer for ``text`` ("" while small) and whether it is too big."""
    used = utf8_len(text)
    if used < PROMPT_BYTES * BUDGET_FROM:
        return "", False
    over = used > PROMPT_BYTES
    kb = f"{used / 1024:,.0f} KB of {PROMPT_BYTES / 1024:,.0f} KB"
    if over:
        return (f"{kb}: too long for one argument; agents that read the prompt from stdin "
                "still take it"), True
    return f"{kb} an agent can take as one argument", False


class BudgetLabel(QLabel):
    """The prompt's size once it nears the argv limit (hidden before)."""

    def __init__(self, composer: QPlainTextEdit, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composerBudget")
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._composer = composer
        composer.textChanged.connect(self._update)
        self.hide()

    def _update(self) -> None:
        text = self._composer.toPlainText()
        if len(text) * 4 < PROMPT_BYTES * BUDGET_FROM:  # cheap: cannot be near yet
            self.hide()
            return
        shown, over = budget_text(text)
        self.setText(shown)
        theme.follow_color(self, theme.error_text if over else theme.warning_color)
        self.setVisible(bool(shown))
