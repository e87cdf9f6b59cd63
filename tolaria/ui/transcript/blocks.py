"""The pieces of a turn in the transcript: answer text, thinking, error cards; tool cards and
code blocks live in tolaria/ui/transcript/cards/ (re-exported here)."""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette, QWheelEvent
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QSizePolicy,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from tolaria.core.events import summarize_tool_input as summarize_input
from tolaria.ui import theme
from tolaria.ui.transcript.cards.code import CodeBlock, CodeText
from tolaria.ui.transcript.cards.fold import Collapsible
from tolaria.ui.transcript.cards.style import Surface, bold_font, set_tone, small_font
from tolaria.ui.transcript.cards.tool import ToolCard, clip_tail
from tolaria.ui.transcript.markdown import (
    Part,
    SafeTextBrowser,
    render_markdown,
    split_fences,
    split_markdown,
)

__all__ = [
    "CHUNK_CHARS", "MAX_CHUNKS", "CodeBlock", "CodeText", "Collapsible", "ErrorCard", "MarkdownChunk",
    "MarkdownSegment", "RetryNotice", "RichText", "ThinkingBlock", "ToolCard", "clip_tail",
    "human_size", "summarize_input",
]

#: Characters of answer text per rendered chunk; only the last chunk is re-rendered as text
#: streams in, so this bounds the work of one update.
CHUNK_CHARS = 8 * 1024
#: Chunks kept on screen per text segment; older ones give way to a "not shown" note (the store
#: keeps everything). Bounds memory and layout time under an output flood.
MAX_CHUNKS = 48
#: Characters kept of a thinking block, a tool's output, a stderr tail.
MAX_SIDE_TEXT = 64 * 1024


def human_size(chars: int) -> str:
    if chars < 1024:
        return f"{chars} characters"
    if chars < 1024 * 1024:
        return f"{chars / 1024:.0f} KB"
    return f"{chars / 1024 / 1024:.1f} MB"


class RichText(SafeTextBrowser):
    """Read-only markdown that is exactly as tall as its content (the transcript scrolls)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source_text = ""
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        # Transparent through the palette: a style sheet per chunk costs a style pass each.
        self.viewport().setAutoFillBackground(False)
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Base, Qt.GlobalColor.transparent)
        self.setPalette(palette)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.setFixedHeight(0)

    def set_markdown(self, text: str) -> None:
        self.source_text = text
        parent = self.parentWidget()
        if parent is not None and self.width() < 50:
            # Not laid out yet: wrap at the parent's width so the first height is about right.
            self.document().setTextWidth(max(200, parent.width() - 8))
        render_markdown(self.document(), text)
        self._fit()

    def highlight(self, needle: str) -> None:
        """Mark every occurrence of ``needle`` (a search match) without touching the text."""
        selections: list[QTextEdit.ExtraSelection] = []
        if needle:
            color = theme.accent()
            color.setAlpha(90)
            cursor = self.document().find(needle)
            while not cursor.isNull() and len(selections) < 200:
                selection = QTextEdit.ExtraSelection()
                selection.cursor = cursor
                selection.format.setBackground(color)
                selections.append(selection)
                cursor = self.document().find(needle, cursor)
        self.setExtraSelections(selections)

    def _fit(self, *_: Any) -> None:
        height = math.ceil(self.document().size().height()) + 2 * self.frameWidth()
        if height != self.height():
            self.setFixedHeight(height)

    def wheelEvent(self, event: QWheelEvent) -> None:
        event.ignore()  # let the transcript scroll


class MarkdownChunk(QWidget):
    """One chunk of answer text: prose as rich text, each fenced code block as a CodeBlock.

    Re-rendering the live chunk reuses its part widgets in order (streaming text only ever
    grows the last part, or adds one)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source_text = ""
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self._parts: list[tuple[str | None, QWidget]] = []

    def set_markdown(self, text: str) -> None:
        self.source_text = text
        # (Empty text keeps its one prose part: a chunk is emptied and refilled as it streams.)
        parts = split_fences(text) or [Part("")]
        for index, part in enumerate(parts):
            kind = part.language
            if index < len(self._parts) and self._parts[index][0] == kind:
                widget = self._parts[index][1]
            else:
                for _kind, old in self._parts[index:]:
                    old.deleteLater()
                del self._parts[index:]
                widget = RichText(self) if kind is None else CodeBlock(kind, self)
                self._layout.addWidget(widget)
                self._parts.append((kind, widget))
            if isinstance(widget, CodeBlock):
                widget.set_code(part.text)
            elif isinstance(widget, RichText) and widget.source_text != part.text:
                widget.set_markdown(part.text)
        for _kind, old in self._parts[len(parts):]:
            old.deleteLater()
        del self._parts[len(parts):]

    def highlight(self, needle: str) -> None:
        for _kind, widget in self._parts:
            if isinstance(widget, RichText):
                widget.highlight(needle)


class MarkdownSegment(QWidget):
    """A run of answer text: sealed chunks rendered once, and one live chunk."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(0)
        self._elided_label = QLabel(self)
        self._elided_label.setObjectName("elidedNote")
        self._elided_label.setFont(small_font(self._elided_label))
        set_tone(self._elided_label, "muted")
        self._elided_label.hide()
        self._layout.addWidget(self._elided_label)
        self._chunks: list[MarkdownChunk] = []
        self._live = ""
        self._elided = 0
        self._dirty = False
        self._new_chunk()

    def _new_chunk(self, recycled: MarkdownChunk | None = None) -> None:
        chunk = recycled or MarkdownChunk(self)
        self._chunks.append(chunk)
        self._layout.addWidget(chunk)  # (moves a recycled chunk to the end)

    def append(self, text: str) -> None:
        self._live += text
        while (split := split_markdown(self._live, CHUNK_CHARS)) is not None:
            self._chunks[-1].set_markdown(split.sealed)
            self._live = split.rest
            # Under a flood the oldest chunk gives way: reuse its widget for the new live one.
            self._new_chunk(self._evict_oldest() if len(self._chunks) >= MAX_CHUNKS else None)
        self._dirty = True

    def elide_all(self, extra: int = 0) -> None:
        """Everything shown so far gives way (newer text was dropped unseen before it)."""
        for chunk in self._chunks[:-1]:
            self._elided += len(chunk.source_text)
            chunk.deleteLater()
        self._chunks = self._chunks[-1:]
        self._elided += len(self._live) + extra
        self._live = ""
        self._dirty = True
        self._show_elided()

    def _evict_oldest(self) -> MarkdownChunk:
        chunk = self._chunks.pop(0)
        self._elided += len(chunk.source_text)
        self._show_elided()
        chunk.source_text = ""
        return chunk

    def _show_elided(self) -> None:
        if self._elided:
            self._elided_label.setText(f"… {human_size(self._elided)} of earlier output not "
                                       "shown here (the conversation keeps all of it)")
            self._elided_label.show()

    def refresh(self) -> None:
        if self._dirty:
            self._dirty = False
            self._chunks[-1].set_markdown(self._live)

    def source_text(self) -> str:
        return "".join(c.source_text for c in self._chunks[:-1]) + self._live


class ThinkingBlock(Collapsible):
    """The agent's thinking, collapsed by default."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Thinking", parent)
        self.setObjectName("thinkingBlock")
        self.toggle.setAccessibleName("Show thinking")
        set_tone(self.toggle, "muted")
        self._label = QLabel(self.body)
        self._label.setWordWrap(True)
        self._label.setTextFormat(Qt.TextFormat.PlainText)
        self._label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        set_tone(self._label, "muted")
        self.body_layout.addWidget(self._label)
        self.header.addStretch(1)
        self.text = ""
        self._words = 0

    def append(self, text: str) -> None:
        self.text = clip_tail(self.text + text)
        self._words += len(text.split())

    def refresh(self) -> None:
        self.set_title(f"Thinking · {self._words} words")
        if self.expanded:
            self._label.setText(self.text)

    def on_expanded(self) -> None:
        self._label.setText(self.text)


class ErrorCard(Surface):
    """A failure the user must see: what to do (the hint, when known) above the agent's own
    message, and its stderr tail on demand."""

    def __init__(self, message: str, stderr_tail: list[str], parent: QWidget | None = None,
                 *, hint: str = "") -> None:
        super().__init__("error", parent)
        self.setObjectName("errorCard")
        self.message = message
        self.hint = hint
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        title = QLabel("Error", self)
        title.setObjectName("errorTitle")
        title.setFont(bold_font(title))
        set_tone(title, "error")
        layout.addWidget(title)
        #: The actionable line (tolaria.core.turns.diagnose); hidden when there is none.
        self.hint_label = QLabel(hint, self)
        self.hint_label.setObjectName("errorHint")
        self.hint_label.setFont(bold_font(self.hint_label))
        self.hint_label.setWordWrap(True)
        self.hint_label.setTextFormat(Qt.TextFormat.PlainText)
        self.hint_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hint_label.setAccessibleName("What to do")
        self.hint_label.setVisible(bool(hint))
        layout.addWidget(self.hint_label)
        self._message = QLabel(message, self)
        self._message.setObjectName("errorMessage")
        self._message.setWordWrap(True)
        self._message.setTextFormat(Qt.TextFormat.PlainText)
        self._message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                              | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        if hint:  # the raw text stays, as the detail under the hint
            set_tone(self._message, "muted")
        layout.addWidget(self._message)
        self._fold = Collapsible("", self)
        self._stderr = CodeText(self._fold.body, max_lines=12)
        self._fold.body_layout.addWidget(self._stderr)
        self._fold.header.addStretch(1)
        layout.addWidget(self._fold)
        self.set_stderr(stderr_tail)

    def set_stderr(self, lines: list[str]) -> None:
        self.stderr_lines = list(lines)
        self._fold.setVisible(bool(lines))
        self._fold.set_title(f"Show stderr ({len(lines)} lines)")
        self._fold.toggle.setAccessibleName("Show the agent's stderr")
        self._stderr.set_text("\n".join(lines))


class RetryNotice(QLabel):
    """The agent is retrying its model requests (or got through again): said, not hidden."""

    def __init__(self, message: str, parent: QWidget | None = None) -> None:
        super().__init__(message, parent)
        self.setObjectName("retryNotice")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        set_tone(self, "warning")
