"""One changed file's diff under a turn, hunk by hunk, with Accept and Revert (issue 18).

Laid out like a review panel (Zed, Claude desktop): each hunk a rounded block with a muted
header (its ``@@`` range, +added / −removed counts, Accept and Revert at the right) over the
lines, old and new line numbers in a muted gutter, added and removed lines tinted across the
whole width. A hunk's lines scroll inside it past ``HUNK_LINES`` and the file's hunks inside
the file past ``MAX_HEIGHT``, so a long diff never grows the transcript; past ``MAX_LINES`` a
hunk is cut with a count, and only ``MAX_HUNKS`` hunks are built at a time ("Show more"), so
opening a file with thousands of changes never freezes the window.

Accept marks a hunk reviewed; Revert undoes it in the working tree (after a safety copy: Undo
under the turn gives it back). When that fails because the file changed since, the reason shows
under the hunk with "Revert whole file…", which writes nothing by itself: the turn's row first
shows what a whole-file revert would do to the later edits and asks. A turn recorded after a
restart asks under the hunk before it is reverted.
"""

from __future__ import annotations

import dataclasses
import re

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent, QTextCursor, QTextFormat
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from tolaria.chats.review import FileReview, hunk_key
from tolaria.core.checkpoints import Hunk
from tolaria.ui import theme

#: Lines a hunk shows before it scrolls inside.
HUNK_LINES = 18
#: Pixels the whole file's diff takes at most before it scrolls inside.
MAX_HEIGHT = 420
#: Lines of one hunk shown at all (the rest counted).
MAX_LINES = 3000
#: Hunks of one file built at once (each is a few widgets): "Show more" builds the next ones.
MAX_HUNKS = 50
_RANGE = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@ ?(.*)$")


def numbered(hunk: Hunk) -> tuple[str, list[str]]:
    """(the hunk's title, its lines with old / new line numbers in a gutter, sign kept)."""
    lines = hunk.body.splitlines()
    head = _RANGE.match(lines[0]) if lines else None
    old, new = (int(head.group(1)), int(head.group(2))) if head else (0, 0)
    title = f"Lines {new}–{new + max(sum(1 for x in lines[1:] if x[:1] != '-') - 1, 0)}" \
        if head else (lines[0] if lines else "")
    if head and head.group(3):
        title += f"  ·  {head.group(3)}"
    out: list[str] = []
    for line in lines[1:MAX_LINES + 1]:
        sign = line[:1]
        if sign == "\\":  # "\ No newline at end of file"
            out.append(f"{'':>5} {'':>5}   {line[2:]}")
            continue
        left = f"{old:>5}" if sign != "+" else " " * 5
        right = f"{new:>5}" if sign != "-" else " " * 5
        out.append(f"{left} {right} {sign or ' '} {line[1:]}")
        old += sign != "+"
        new += sign != "-"
    if len(lines) - 1 > MAX_LINES:
        out.append(f"… {len(lines) - 1 - MAX_LINES} more lines")
    return title, out


def counts(hunk: Hunk) -> tuple[int, int]:
    lines = hunk.body.splitlines()[1:]
    return (sum(1 for x in lines if x.startswith("+")), sum(1 for x in lines if x.startswith("-")))


def _button(parent: QWidget, name: str, text: str, tip: str) -> QPushButton:
    button = QPushButton(text, parent)
    button.setObjectName(name)
    button.setToolTip(tip)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    return button


class HunkLines(QPlainTextEdit):
    """A hunk's numbered lines, read-only, tinted per line across the full width."""

    GUTTER = 12  # "  old   new " before the sign

    def __init__(self, lines: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hunkLines")
        self.setReadOnly(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFont(theme.mono_font())
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.setPlainText("\n".join(lines))
        self._tint(lines)
        shown = min(len(lines), HUNK_LINES)
        height = self.fontMetrics().lineSpacing() * shown + 2 * self.frameWidth() + 8
        self.setFixedHeight(height)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded
                                        if len(lines) > HUNK_LINES
                                        else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def _tint(self, lines: list[str]) -> None:
        added, removed = theme.diff_colors()
        muted = theme.muted_text()
        selections: list[QTextEdit.ExtraSelection] = []
        block = self.document().firstBlock()
        for line in lines:
            sign = line[self.GUTTER:self.GUTTER + 1]
            gutter = QTextEdit.ExtraSelection()
            cursor = QTextCursor(block)
            cursor.movePosition(QTextCursor.MoveOperation.Right,
                                QTextCursor.MoveMode.KeepAnchor, min(self.GUTTER, len(line)))
            gutter.cursor = cursor
            gutter.format.setForeground(muted)
            if sign in ("+", "-"):
                whole = QTextEdit.ExtraSelection()
                whole.cursor = QTextCursor(block)
                whole.format.setBackground(added if sign == "+" else removed)
                whole.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
                selections.append(whole)
            selections.append(gutter)
            block = block.next()
        self.setExtraSelections(selections)


class FileDiffView(QFrame):
    """One file's hunks; emits intents, shows what the store says was done."""

    #: Mark a hunk reviewed: path, hunk key.
    accept_requested = Signal(str, str)
    #: Undo a hunk in the working tree: path, hunk key.
    revert_hunk_requested = Signal(str, str)
    #: Plan putting the whole file back (offered when a hunk no longer applies; the turn's row
    #: shows the plan and asks): path.
    revert_file_requested = Signal(str)
    #: A yes to a hunk's Revert that asked first: path, hunk key, the plan's fingerprint.
    revert_hunk_confirmed = Signal(str, str, str)

    def __init__(self, path: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fileDiff")
        self.path = path
        self.review: FileReview | None = None
        self._busy = False
        self._restyle()
        theme.on_palette_change(self, self._restyle)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(14, 2, 0, 6)
        self.scroller = QScrollArea(self)
        self.scroller.setObjectName("fileDiffScroll")
        self.scroller.setWidgetResizable(True)
        self.scroller.setFrameShape(QFrame.Shape.NoFrame)
        self.scroller.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        outer.addWidget(self.scroller)
        self.body = QWidget(self.scroller)
        self.body.setObjectName("fileDiffBody")
        self._blocks = QVBoxLayout(self.body)
        self._blocks.setContentsMargins(0, 0, 4, 0)
        self._blocks.setSpacing(8)
        self.scroller.setWidget(self.body)
        self.status = QLabel("Loading the diff…", self.body)
        self.status.setObjectName("fileDiffStatus")
        self.status.setWordWrap(True)
        self._blocks.addWidget(self.status)
        self._hunks: list[QFrame] = []
        #: How many hunks are built (MAX_HUNKS more per "Show more").
        self._limit = MAX_HUNKS
        self.more_button = _button(self.body, "moreHunksButton", "",
                                   "Show the next changes of this file")
        self.more_button.clicked.connect(self._on_more_button_clicked)
        self.more_button.hide()
        self._fit()

    def _on_more_button_clicked(self) -> None:
        self._limit += MAX_HUNKS
        if self.review is not None:
            self.set_review(self.review)

    def _restyle(self) -> None:
        border, card = theme.css(theme.border()), theme.css(theme.card_background())
        head = theme.css(theme.mix(theme.card_background(), theme.text(), 0.06))
        muted = theme.css(theme.muted_text())
        self.setStyleSheet(
            f"QFrame#hunk {{ border: 1px solid {border}; border-radius: 8px;"
            f" background: {theme.css(theme.base())}; }}"
            f"QWidget#hunkHead {{ background: {head}; border-top-left-radius: 8px;"
            f" border-top-right-radius: 8px; border-bottom: 1px solid {border}; }}"
            f"QLabel#hunkTitle, QLabel#fileDiffStatus, QLabel#hunkState {{ color: {muted}; }}"
            f"QLabel#hunkAdded {{ color: {theme.css(theme.success_color())}; }}"
            f"QLabel#hunkRemoved {{ color: {theme.css(theme.error_colors()[2])}; }}"
            f"QLabel#hunkError {{ color: {theme.css(theme.warning_color())}; }}"
            f"QPlainTextEdit#hunkLines {{ background: {theme.css(theme.base())};"
            f" border: none; border-bottom-left-radius: 8px;"
            f" border-bottom-right-radius: 8px; }}"
            f"QFrame#fileDiff QPushButton {{ border: 1px solid {border}; border-radius: 5px;"
            f" padding: 1px 9px; background: {card}; }}"
            f"QFrame#fileDiff QPushButton:hover {{ background: {theme.css(theme.hover_background())}; }}"
            f"QFrame#fileDiff QPushButton:disabled {{ color: {muted}; }}"
            f"QWidget#fileDiffBody {{ background: transparent; }}")

    def set_review(self, review: FileReview) -> None:
        self.review = review
        for old in self._hunks:
            self._blocks.removeWidget(old)
            old.hide()
            old.deleteLater()
        self._hunks = []
        note = ""
        if review.binary:
            note = "Binary file: no text diff to show."
        elif not review.hunks:
            note = review.error or "No differences in this file."
        elif review.file_reverted:
            note = "The whole file was put back as it was before this turn."
        self.status.setText(note)
        self.status.setVisible(bool(note))
        self._blocks.removeWidget(self.more_button)
        for hunk in review.hunks[:self._limit]:
            block = self._hunk_block(hunk, review)
            self._hunks.append(block)
            self._blocks.addWidget(block)
            block.show()  # now, not from the event loop: _fit measures the shown hunks
        hidden = len(review.hunks) - len(self._hunks)
        self.more_button.setText(f"Show {min(hidden, MAX_HUNKS)} more of {hidden} changes")
        self._blocks.addWidget(self.more_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.more_button.setVisible(hidden > 0)
        self._apply_busy()
        self._fit()

    def _hunk_block(self, hunk: Hunk, review: FileReview) -> QFrame:
        key = hunk_key(hunk)
        block = QFrame(self.body)
        block.setObjectName("hunk")
        block.setProperty("hunkKey", key)
        column = QVBoxLayout(block)
        column.setContentsMargins(1, 1, 1, 1)
        column.setSpacing(0)
        head = QWidget(block)
        head.setObjectName("hunkHead")
        head.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        # Never taller than its line: spare height (a wrapped note measured late) goes below.
        head.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        row = QHBoxLayout(head)
        row.setContentsMargins(10, 4, 6, 4)
        title, lines = numbered(hunk)
        label = QLabel(title, head)
        label.setObjectName("hunkTitle")
        label.setTextFormat(Qt.TextFormat.PlainText)
        row.addWidget(label, 1)
        plus, minus = counts(hunk)
        for name, text in (("hunkAdded", f"+{plus}"), ("hunkRemoved", f"−{minus}")):
            count = QLabel(text, head)
            count.setObjectName(name)
            count.setFont(theme.mono_font())
            row.addWidget(count)
        if key in review.reverted or review.file_reverted:
            state = QLabel("Reverted", head)
        elif key in review.accepted:
            state = QLabel("✓ Accepted", head)
        else:
            state = None
        if state is not None:
            state.setObjectName("hunkState")
            row.addWidget(state)
        open_ = state is None or key in review.accepted
        if open_ and not review.file_reverted and key not in review.reverted:
            if key not in review.accepted:
                accept = _button(head, "acceptHunkButton", "Accept", "Mark this change reviewed")
                accept.clicked.connect(lambda: self.accept_requested.emit(self.path, key))
                row.addWidget(accept)
            revert = _button(head, "revertHunkButton", "Revert",
                             "Undo this change in the working tree")
            revert.clicked.connect(lambda: self.revert_hunk_requested.emit(self.path, key))
            row.addWidget(revert)
        column.addWidget(head)
        if review.failed == key and review.error:
            column.addWidget(self._failure(block, review.error))
        elif review.confirm_hunk == key and review.confirm:
            column.addWidget(self._asking(block, review, key))
        column.addWidget(HunkLines(lines, block))
        return block

    def _failure(self, parent: QWidget, error: str) -> QWidget:
        box = QWidget(parent)
        box.setObjectName("hunkFailure")
        line = QHBoxLayout(box)
        line.setContentsMargins(10, 4, 6, 4)
        text = QLabel(error, box)
        text.setObjectName("hunkError")
        text.setWordWrap(True)
        text.setTextFormat(Qt.TextFormat.PlainText)
        line.addWidget(text, 1)
        whole = _button(box, "revertWholeFileButton", "Revert whole file…",
                        f"Show what putting {self.path} back as it was before this turn would "
                        "do to the later edits, then ask")
        whole.clicked.connect(lambda: self.revert_file_requested.emit(self.path))
        line.addWidget(whole)
        return box

    def _asking(self, parent: QWidget, review: FileReview, key: str) -> QWidget:
        box = QWidget(parent)
        box.setObjectName("hunkConfirm")
        line = QHBoxLayout(box)
        line.setContentsMargins(10, 4, 6, 4)
        text = QLabel(review.confirm, box)
        text.setObjectName("hunkError")
        text.setWordWrap(True)
        text.setTextFormat(Qt.TextFormat.PlainText)
        line.addWidget(text, 1)
        yes = _button(box, "revertHunkConfirmButton", "Revert anyway",
                      "Undo this change in the working tree (Undo under the turn gives it back)")
        yes.clicked.connect(
            lambda: self.revert_hunk_confirmed.emit(self.path, key, review.confirm_key))
        line.addWidget(yes)
        no = _button(box, "revertHunkCancelButton", "Cancel", "Keep the file as it is")
        no.clicked.connect(lambda: self.set_review(dataclasses.replace(
            review, confirm_hunk="", confirm="", confirm_key="")))
        line.addWidget(no)
        return box

    def hunk_blocks(self) -> list[QFrame]:
        return list(self._hunks)

    def set_busy(self, busy: bool) -> None:
        """While the chat runs a turn nothing is reverted (the agent may be writing)."""
        self._busy = busy
        self._apply_busy()

    def _apply_busy(self) -> None:
        for name in ("revertHunkButton", "revertWholeFileButton", "revertHunkConfirmButton"):
            for button in self.findChildren(QPushButton, name):
                button.setEnabled(not self._busy)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self._fit()

    def _fit(self) -> None:
        """As tall as the hunks, up to MAX_HEIGHT; past it the hunks scroll inside."""
        self._blocks.invalidate()
        want = self._blocks.totalSizeHint().height() + 4
        width = self.scroller.viewport().width()
        if width > 100 and self._blocks.hasHeightForWidth():
            # A wrapped note (a failure, a question) is as tall as it is at this width, not
            # at the label's guessed one.
            want = self._blocks.totalHeightForWidth(width) + 4
        self.scroller.setFixedHeight(min(want, MAX_HEIGHT))
        self.scroller.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded
                                               if want > MAX_HEIGHT
                                               else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
