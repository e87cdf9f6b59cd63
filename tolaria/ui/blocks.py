"""The pieces of a turn in the transcript: answer text, thinking, tool cards, error cards."""

from __future__ import annotations

import json
import math
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette, QWheelEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QTextBrowser,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.ui import theme
from tolaria.ui.markdown import CodeHighlighter, render_markdown, split_markdown

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


def clip_tail(text: str, limit: int = MAX_SIDE_TEXT) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


class RichText(QTextBrowser):
    """Read-only markdown that is exactly as tall as its content (the transcript scrolls)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source_text = ""
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setOpenExternalLinks(True)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        # Transparent through the palette: a style sheet per chunk costs a style pass each.
        self.viewport().setAutoFillBackground(False)
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Base, Qt.GlobalColor.transparent)
        self.setPalette(palette)
        self.document().setDocumentMargin(2)
        self._highlighter = CodeHighlighter(self.document())
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


class MarkdownSegment(QWidget):
    """A run of answer text: sealed chunks rendered once, and one live chunk."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(0)
        self._elided_label = QLabel(self)
        self._elided_label.setObjectName("elidedNote")
        self._elided_label.setStyleSheet(f"color: {theme.css(theme.muted_text())};")
        self._elided_label.hide()
        self._layout.addWidget(self._elided_label)
        self._chunks: list[RichText] = []
        self._live = ""
        self._elided = 0
        self._dirty = False
        self._new_chunk()

    def _new_chunk(self, recycled: RichText | None = None) -> None:
        chunk = recycled or RichText(self)
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

    def _evict_oldest(self) -> RichText:
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


class Collapsible(QWidget):
    """A header row with a disclosure button and a body shown when expanded."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(2)
        self.header = QHBoxLayout()
        self.header.setSpacing(6)
        self.toggle = QToolButton(self)
        self.toggle.setCheckable(True)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setAutoRaise(True)
        self.toggle.setText(title)
        self.toggle.toggled.connect(self._on_toggle_toggled)
        self.header.addWidget(self.toggle)
        outer.addLayout(self.header)
        self.body = QWidget(self)
        self.body_layout = QVBoxLayout(self.body)
        self.body_layout.setContentsMargins(22, 0, 0, 4)
        self.body.hide()
        outer.addWidget(self.body)

    @property
    def expanded(self) -> bool:
        return self.toggle.isChecked()

    def _on_toggle_toggled(self, on: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body.setVisible(on)
        if on:
            self.on_expanded()

    def on_expanded(self) -> None:
        """Subclasses fill the body lazily."""


class ThinkingBlock(Collapsible):
    """The agent's thinking, collapsed by default."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Thinking", parent)
        self.setObjectName("thinkingBlock")
        self.toggle.setAccessibleName("Show thinking")
        self.toggle.setStyleSheet(f"color: {theme.css(theme.muted_text())}; font-style: italic;")
        self._label = QLabel(self.body)
        self._label.setWordWrap(True)
        self._label.setTextFormat(Qt.TextFormat.PlainText)
        self._label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._label.setStyleSheet(f"color: {theme.css(theme.muted_text())};")
        self.body_layout.addWidget(self._label)
        self.header.addStretch(1)
        self.text = ""
        self._words = 0

    def append(self, text: str) -> None:
        self.text = clip_tail(self.text + text)
        self._words += len(text.split())

    def refresh(self) -> None:
        self.toggle.setText(f"Thinking · {self._words} words")
        if self.expanded:
            self._label.setText(self.text)

    def on_expanded(self) -> None:
        self._label.setText(self.text)


def summarize_input(value: object, limit: int = 100) -> str:
    """One line saying what a tool was asked to do."""
    if isinstance(value, dict):
        for key in ("command", "description", "file_path", "path", "pattern", "query", "url",
                    "prompt"):
            if isinstance(value.get(key), str) and value[key].strip():
                line = " ".join(str(value[key]).split())
                return line if len(line) <= limit else line[: limit - 1] + "…"
    if value is None or value == {}:
        return ""
    line = json.dumps(value, ensure_ascii=False)
    return line if len(line) <= limit else line[: limit - 1] + "…"


_TOOL_STATUS = {
    "pending": "pending…",
    "running": "running…",
    "done": "done",
    "failed": "failed",
    "cancelled": "cancelled",
    "interrupted": "interrupted",
    "unfinished": "no result",
}


class ToolCard(QFrame):
    """One tool call: name, what it was asked, live status; input and output when expanded."""

    def __init__(self, tool_id: str, name: str, tool_input: object,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolCard")
        self.tool_id = tool_id
        self.status = "running"
        self.output = ""
        self.setStyleSheet(
            f"QFrame#toolCard {{ background: {theme.css(theme.card_background())};"
            f" border: 1px solid {theme.css(theme.border())}; border-radius: 6px; }}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 8, 4)
        self._fold = Collapsible(name or "tool", self)
        self._fold.toggle.setAccessibleName(f"Tool {name}: show details")
        font = self._fold.toggle.font()
        font.setBold(True)
        self._fold.toggle.setFont(font)
        self._summary = QLabel(summarize_input(tool_input), self)
        self._summary.setStyleSheet(f"color: {theme.css(theme.muted_text())};")
        self._summary.setFont(theme.mono_font())
        self._summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._status = QLabel(self)
        self._status.setObjectName("toolStatus")
        self._fold.header.addWidget(self._summary, 1)
        self._fold.header.addWidget(self._status)
        layout.addWidget(self._fold)
        self._input = self._text_box(json.dumps(tool_input, indent=2, ensure_ascii=False)
                                      if tool_input not in (None, {}) else "(no input)")
        self._output_box = self._text_box("")
        self._fold.body_layout.addWidget(QLabel("Input", self._fold.body))
        self._fold.body_layout.addWidget(self._input)
        self._fold.body_layout.addWidget(QLabel("Output", self._fold.body))
        self._fold.body_layout.addWidget(self._output_box)
        self.set_status("running")

    def _text_box(self, text: str) -> QPlainTextEdit:
        box = QPlainTextEdit(self._fold.body)
        box.setReadOnly(True)
        box.setFont(theme.mono_font())
        box.setMaximumHeight(180)
        box.setPlainText(text)
        return box

    def set_status(self, status: str) -> None:
        self.status = status
        self._status.setText(_TOOL_STATUS.get(status, status))
        color = {"done": theme.success_color(), "failed": theme.error_colors()[2],
                 "cancelled": theme.warning_color(), "interrupted": theme.warning_color()}.get(
            status, theme.muted_text())
        self._status.setStyleSheet(f"color: {theme.css(color)};")
        self._status.setAccessibleName(f"tool status: {self._status.text()}")

    def apply_update(self, name: str | None, tool_input: object, status: str | None,
                     output: str | None) -> None:
        """A live update of the running call (``ToolUpdate``): None means unchanged."""
        if name:
            self._fold.toggle.setText(name)
            self._fold.toggle.setAccessibleName(f"Tool {name}: show details")
        if tool_input is not None:
            self._summary.setText(summarize_input(tool_input))
            self._input.setPlainText(json.dumps(tool_input, indent=2, ensure_ascii=False,
                                                default=str))
        if status and self.status in ("pending", "running"):
            self.set_status(status)
        if output is not None and self.status in ("pending", "running"):
            self.output = clip_tail(output)
            self._output_box.setPlainText(self.output)

    @property
    def title(self) -> str:
        return self._fold.toggle.text()

    def finish(self, output: str, is_error: bool) -> None:
        self.output = clip_tail(output)
        self._output_box.setPlainText(self.output or "(no output)")
        self.set_status("failed" if is_error else "done")

    @property
    def expanded(self) -> bool:
        return self._fold.expanded

    def set_expanded(self, on: bool) -> None:
        self._fold.toggle.setChecked(on)


class ErrorCard(QFrame):
    """A failure the user must see: what to do (the hint, when known) above the agent's own
    message, and its stderr tail on demand."""

    def __init__(self, message: str, stderr_tail: list[str], parent: QWidget | None = None,
                 *, hint: str = "") -> None:
        super().__init__(parent)
        self.setObjectName("errorCard")
        self.message = message
        self.hint = hint
        background, edge, foreground = theme.error_colors()
        self.setStyleSheet(
            f"QFrame#errorCard {{ background: {theme.css(background)};"
            f" border: 1px solid {theme.css(edge)}; border-radius: 6px; }}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        title = QLabel("Error", self)
        title.setStyleSheet(f"color: {theme.css(foreground)}; font-weight: bold;")
        layout.addWidget(title)
        #: The actionable line (tolaria.core.turns.diagnose); hidden when there is none.
        self.hint_label = QLabel(hint, self)
        self.hint_label.setObjectName("errorHint")
        self.hint_label.setWordWrap(True)
        self.hint_label.setTextFormat(Qt.TextFormat.PlainText)
        self.hint_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hint_label.setStyleSheet("font-weight: bold;")
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
            self._message.setStyleSheet(f"color: {theme.css(theme.muted_text())};")
        layout.addWidget(self._message)
        self._fold = Collapsible("", self)
        self._stderr = QPlainTextEdit(self._fold.body)
        self._stderr.setReadOnly(True)
        self._stderr.setFont(theme.mono_font())
        self._stderr.setMaximumHeight(160)
        self._fold.body_layout.addWidget(self._stderr)
        self._fold.header.addStretch(1)
        layout.addWidget(self._fold)
        self.set_stderr(stderr_tail)

    def set_stderr(self, lines: list[str]) -> None:
        self.stderr_lines = list(lines)
        self._fold.setVisible(bool(lines))
        self._fold.toggle.setText(f"Show stderr ({len(lines)} lines)")
        self._fold.toggle.setAccessibleName("Show the agent's stderr")
        self._stderr.setPlainText("\n".join(lines))


class RetryNotice(QLabel):
    """The agent is retrying its model requests (or got through again): said, not hidden."""

    def __init__(self, message: str, parent: QWidget | None = None) -> None:
        super().__init__(message, parent)
        self.setObjectName("retryNotice")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setStyleSheet(f"color: {theme.css(theme.warning_color())};")
