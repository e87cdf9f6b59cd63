"""Under a finished turn: the files it changed in the chat's git folder, and undoing them.

A compact "N files changed" row that unfolds into the files (added / modified / deleted), each
with "Revert file", and "Rewind to before this turn". Nothing is written on a click alone when
it could cost the user anything: the controller first plans it (tolaria/chats/restore.py) and,
when a file changed after the turn, another agent writes in the repository, the turn was
recorded after a restart, or for any rewind, the plan shows inline (no modal dialog) under the
file or the turn: which files carry later edits and what happens to them, the files left alone,
or why nothing can be done (a submodule, a folder). After a restore "Undo …" gives back the exact
bytes it replaced (kept across restarts). A turn recorded after a restart says so.
Clicking a file unfolds its diff under it, hunk by hunk with Accept / Revert
(tolaria/ui/review/diff_review.py); an open diff stays open while the list is refreshed. A folder
outside git gets a muted note instead, and nothing that could lose work.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from tolaria.chats.checkpoints import CANCEL, UNDO_LAST, TurnChanges, UndoRequest
from tolaria.chats.restore_plan import REVERT as PLAN_REVERT
from tolaria.chats.restore_plan import RestorePlan
from tolaria.chats.review import ACCEPT, REVERT, FileReview, ReviewRequest
from tolaria.ui import theme
from tolaria.ui.review.diff_review import FileDiffView

#: Status -> its badge letter.
_BADGES = {"added": "A", "modified": "M", "deleted": "D", "type": "T"}


def _flat(parent: QWidget, name: str, text: str, tip: str) -> QPushButton:
    button = QPushButton(text, parent)
    button.setObjectName(name)
    button.setFlat(True)
    button.setToolTip(tip)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    return button


class _FileLine(QWidget):
    """A changed file's line: a click anywhere on it (not on its button) opens its diff."""

    clicked = Signal()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mouseReleaseEvent(event)


def _row_css() -> str:
    muted = theme.css(theme.muted_text())
    return (
        f"QFrame#turnChanges {{ border: 1px solid {theme.css(theme.border())};"
        f" border-radius: 8px; background: {theme.css(theme.card_background())}; }}"
        f"QFrame#turnChanges[plain=\"true\"] {{ border: none; background: transparent; }}"
        f"QLabel#turnChangesNote, QLabel#turnChangesRewound {{ color: {muted}; }}"
        f"QLabel#turnChangesLate {{ color: {theme.css(theme.warning_color())}; }}"
        f"QWidget#restoreConfirm {{ border: 1px solid {theme.css(theme.warning_color())};"
        f" border-radius: 6px; background: {theme.css(theme.base())}; }}"
        f"QWidget#restoreConfirm QLabel {{ border: none; background: transparent; }}"
        f"QPushButton#restoreConfirmButton {{ color: {theme.css(theme.warning_color())};"
        f" font-weight: bold; }}"
        f"QFrame#turnChanges QPushButton {{ padding: 0px 6px; }}"
        f"QPushButton#turnChangesToggle:checked {{ background: transparent; border: none; }}")


class TurnChangesRow(QFrame):
    #: Put one file back as it was before this turn: turn id, path.
    revert_file_requested = Signal(int, str)
    #: Show a file's diff, or accept / revert one of its hunks: ReviewRequest.
    review_requested = Signal(object)
    #: Put the folder back as it was before this turn (the controller plans it first): turn id.
    rewind_requested = Signal(int)
    #: A yes to a shown plan, its Cancel, or Undo of the turn's last restore: UndoRequest.
    restore_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("turnChanges")
        self.changes: TurnChanges | None = None
        self._busy = False
        theme.follow(self, _row_css)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 2, 4, 2)
        layout.setSpacing(0)
        head = QHBoxLayout()
        self.toggle = _flat(self, "turnChangesToggle", "", "Show the files this turn changed")
        self.toggle.setCheckable(True)
        self.toggle.toggled.connect(self._on_toggle_toggled)
        head.addWidget(self.toggle)
        self.rewound_label = QLabel("rewound", self)
        self.rewound_label.setObjectName("turnChangesRewound")
        self.rewound_label.setToolTip("Its changes were undone by a rewind")
        head.addWidget(self.rewound_label)
        self.late_label = QLabel("recorded after a restart", self)
        self.late_label.setObjectName("turnChangesLate")
        self.late_label.setToolTip(
            "Tolaria was closed (or crashed) during this turn: what it changed was recorded at "
            "the next start, so it may include your own edits made meanwhile. Every revert of "
            "it asks first.")
        head.addWidget(self.late_label)
        self.note = QLabel(self)
        self.note.setObjectName("turnChangesNote")
        self.note.setWordWrap(True)
        head.addWidget(self.note, 1)
        head.addStretch(0)
        self.undo_button = _flat(self, "undoRestoreButton", "", "")
        self.undo_button.clicked.connect(self._on_undo_button_clicked)
        head.addWidget(self.undo_button)
        self.rewind_button = _flat(self, "rewindButton", "Rewind to before this turn",
                                   "Put every file back as it was before this turn")
        self.rewind_button.clicked.connect(self._on_rewind_button_clicked)
        head.addWidget(self.rewind_button)
        layout.addLayout(head)
        self.confirm = QWidget(self)
        self.confirm.setObjectName("restoreConfirm")
        self.confirm.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        row = QHBoxLayout(self.confirm)
        row.setContentsMargins(8, 4, 4, 4)
        text = QVBoxLayout()
        text.setSpacing(2)
        self.confirm_title = QLabel(self.confirm)
        self.confirm_title.setObjectName("restoreConfirmTitle")
        self.confirm_title.setTextFormat(Qt.TextFormat.PlainText)
        self.confirm_title.setWordWrap(True)
        bold = self.confirm_title.font()
        bold.setBold(True)
        self.confirm_title.setFont(bold)
        text.addWidget(self.confirm_title)
        self.confirm_label = QLabel(self.confirm)
        self.confirm_label.setObjectName("restoreConfirmText")
        self.confirm_label.setWordWrap(True)
        self.confirm_label.setTextFormat(Qt.TextFormat.PlainText)
        self.confirm_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        text.addWidget(self.confirm_label)
        row.addLayout(text, 1)
        self.confirm_yes = _flat(self.confirm, "restoreConfirmButton", "", "Go ahead as said")
        self.confirm_yes.clicked.connect(self._on_confirm_clicked)
        row.addWidget(self.confirm_yes, 0, Qt.AlignmentFlag.AlignTop)
        self.confirm_no = _flat(self.confirm, "restoreCancelButton", "Cancel",
                                "Keep the files as they are")
        self.confirm_no.clicked.connect(self._on_cancel_clicked)
        row.addWidget(self.confirm_no, 0, Qt.AlignmentFlag.AlignTop)
        self.confirm.hide()
        self._confirm_slot = QVBoxLayout()
        self._confirm_slot.setContentsMargins(0, 2, 0, 2)
        layout.addLayout(self._confirm_slot)
        self.files = QWidget(self)
        self._files = QVBoxLayout(self.files)
        self._files.setContentsMargins(0, 0, 0, 2)
        self._files.setSpacing(0)
        self.files.hide()
        layout.addWidget(self.files)
        self._rows: list[QWidget] = []
        #: path -> its open diff (kept across set_changes).
        self._diffs: dict[str, FileDiffView] = {}
        self.hide()

    def set_changes(self, changes: TurnChanges) -> None:
        previous = self.changes
        self.changes = changes
        count = len(changes.files)
        self.toggle.setVisible(count > 0)
        self.toggle.setText(f"{'▾' if self.toggle.isChecked() else '▸'} {count} file"
                            f"{'s' if count != 1 else ''} changed")
        self.rewound_label.setVisible(changes.rewound)
        self.note.setText(changes.notice or "")
        self.note.setVisible(bool(changes.notice))
        self.rewind_button.setVisible(count > 0 and not changes.rewound)
        self.late_label.setVisible(changes.late and count > 0)
        self.undo_button.setText(f"↶ Undo {changes.undo}" if changes.undo else "")
        self.undo_button.setToolTip("Give back the exact files this replaced (it asks first if "
                                    "they changed since)")
        self.undo_button.setVisible(bool(changes.undo))
        # A note alone is a muted line, not a card.
        self.setProperty("plain", "true" if count == 0 else "false")
        self.style().unpolish(self)
        self.style().polish(self)
        for old in self._rows:
            self._files.removeWidget(old)
            old.hide()
            old.deleteLater()
        for view in self._diffs.values():
            self._files.removeWidget(view)
        self._rows = [self._file_row(change.path, change.status) for change in changes.files]
        for row, change in zip(self._rows, changes.files, strict=True):
            self._files.addWidget(row)
            if change.path in self._diffs:
                self._files.addWidget(self._diffs[change.path])
        self._place_confirm(changes.confirm if isinstance(changes.confirm, RestorePlan) else None)
        stale = previous is not None and (previous.reverted != changes.reverted
                                          or previous.rewound != changes.rewound
                                          or previous.undo != changes.undo)
        for path in self._diffs if stale else ():
            self.review_requested.emit(ReviewRequest(changes.turn_id, path))
        self._apply_busy()
        self.setVisible(count > 0 or changes.rewound or bool(changes.notice)
                        or changes.confirm is not None)

    def _place_confirm(self, plan: RestorePlan | None) -> None:
        """The plan waiting for a yes (or saying why not): under its file for a revert of one
        file, else under the turn's line."""
        self.confirm.hide()
        self._confirm_slot.removeWidget(self.confirm)
        self._files.removeWidget(self.confirm)
        if plan is None:
            return
        title, *body = plan.lines()
        self.confirm_title.setText(title)
        self.confirm_label.setText("\n".join(line.strip() if line.startswith("  •") else line
                                             for line in body))
        self.confirm_label.setVisible(bool(body))
        yes = plan.confirm_text()
        self.confirm_yes.setText(yes)
        self.confirm_yes.setVisible(bool(yes))
        self.confirm_no.setText("Cancel" if yes else "Close")
        row = None
        if plan.kind == PLAN_REVERT and len(plan.paths) == 1 and self.changes is not None:
            paths = [c.path for c in self.changes.files]
            if plan.paths[0] in paths and self.files.isVisibleTo(self):
                row = self._rows[paths.index(plan.paths[0])]
        if row is not None:
            self._files.insertWidget(self._files.indexOf(row) + 1, self.confirm)
        else:
            self._confirm_slot.addWidget(self.confirm)
        self.confirm.show()

    def _file_row(self, path: str, status: str) -> QWidget:
        row = _FileLine(self.files)
        row.setObjectName("changedFile")
        row.setCursor(Qt.CursorShape.PointingHandCursor)
        row.setToolTip(f"Show what this turn changed in {path}")
        row.clicked.connect(lambda: self.toggle_diff(path))
        line = QHBoxLayout(row)
        line.setContentsMargins(14, 0, 0, 0)
        chevron = QLabel("▾" if path in self._diffs else "▸", row)
        chevron.setObjectName("changedFileChevron")
        line.addWidget(chevron)
        badge = QLabel(_BADGES.get(status, "M"), row)
        badge.setObjectName("changedFileStatus")
        badge.setToolTip(status)
        colour = {"added": theme.success_color, "deleted": theme.error_text}.get(
            status, theme.warning_color)
        theme.follow_color(badge, colour, " font-weight: bold;")
        line.addWidget(badge)
        name = QLabel(path, row)
        name.setObjectName("changedFilePath")
        name.setTextFormat(Qt.TextFormat.PlainText)
        name.setFont(theme.mono_font())
        name.setToolTip(path)
        # A long path must not widen the transcript: it is cut at the row's edge instead.
        name.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        line.addWidget(name, 1)
        assert self.changes is not None
        reverted = path in self.changes.reverted or self.changes.rewound
        button = _flat(row, "revertFileButton", "Reverted" if reverted else "Revert file",
                       f"Put {path} back as it was before this turn")
        button.setEnabled(not reverted)
        turn_id = self.changes.turn_id
        button.clicked.connect(lambda: self.revert_file_requested.emit(turn_id, path))
        line.addWidget(button)
        return row

    def set_busy(self, busy: bool) -> None:
        """While the chat runs a turn nothing is undone (the agent may be writing)."""
        self._busy = busy
        self._apply_busy()

    def _apply_busy(self) -> None:
        self.rewind_button.setEnabled(not self._busy)
        self.undo_button.setEnabled(not self._busy)
        self.confirm_yes.setEnabled(not self._busy)
        for view in self._diffs.values():
            view.set_busy(self._busy)
        for row in self._rows:
            button = row.findChild(QPushButton, "revertFileButton")
            if button is not None and button.text() == "Revert file":
                button.setEnabled(not self._busy)

    def file_rows(self) -> list[QWidget]:
        return list(self._rows)

    # -- the diff of a file ---------------------------------------------------------------------
    def toggle_diff(self, path: str) -> None:
        """Unfold ``path``'s diff under its line (asking for it), or fold it away."""
        if self.changes is None:
            return
        view = self._diffs.pop(path, None)
        if view is not None:
            self._files.removeWidget(view)
            view.deleteLater()
        else:
            view = FileDiffView(path, self.files)
            view.accept_requested.connect(self._on_diff_accept_requested)
            view.revert_hunk_requested.connect(self._on_diff_revert_hunk_requested)
            view.revert_file_requested.connect(self._on_diff_revert_file_requested)
            view.revert_hunk_confirmed.connect(self._on_diff_revert_hunk_confirmed)
            view.set_busy(self._busy)
            self._diffs[path] = view
            self.review_requested.emit(ReviewRequest(self.changes.turn_id, path))
        self.set_changes(self.changes)

    def diff_view(self, path: str) -> FileDiffView | None:
        return self._diffs.get(path)

    def show_review(self, review: FileReview) -> None:
        """The store's answer for one file (ignored when its diff was folded meanwhile)."""
        view = self._diffs.get(review.path)
        if view is not None and self.changes is not None and review.turn_id == self.changes.turn_id:
            view.set_review(review)

    def _on_diff_accept_requested(self, path: str, key: str) -> None:
        if self.changes is not None:
            self.review_requested.emit(ReviewRequest(self.changes.turn_id, path, ACCEPT, key))

    def _on_diff_revert_hunk_requested(self, path: str, key: str) -> None:
        if self.changes is not None and not self._busy:
            self.review_requested.emit(ReviewRequest(self.changes.turn_id, path, REVERT, key))

    def _on_diff_revert_hunk_confirmed(self, path: str, key: str, fingerprint: str) -> None:
        if self.changes is not None and not self._busy:
            self.review_requested.emit(ReviewRequest(self.changes.turn_id, path, REVERT, key,
                                                     confirmed=fingerprint))

    def _on_diff_revert_file_requested(self, path: str) -> None:
        if self.changes is not None and not self._busy:
            self.revert_file_requested.emit(self.changes.turn_id, path)

    def _on_toggle_toggled(self, shown: bool) -> None:
        self.files.setVisible(shown)
        if self.changes is not None:
            self.set_changes(self.changes)

    def _on_rewind_button_clicked(self) -> None:
        """The controller plans the rewind and answers with it as ``confirm`` (always asked)."""
        if self.changes is not None and not self._busy:
            self.rewind_requested.emit(self.changes.turn_id)

    def _on_undo_button_clicked(self) -> None:
        if self.changes is not None and not self._busy:
            self.restore_requested.emit(UndoRequest(self.changes.turn_id, kind=UNDO_LAST))

    def _on_confirm_clicked(self) -> None:
        plan = self.changes.confirm if self.changes is not None else None
        if not isinstance(plan, RestorePlan) or self._busy:
            return
        self.confirm.hide()
        path = plan.paths[0] if plan.kind == PLAN_REVERT and len(plan.paths) == 1 else None
        kind = UNDO_LAST if plan.kind == "undo" else ""
        self.restore_requested.emit(UndoRequest(plan.turn_id, path, kind=kind,
                                                confirmed=plan.fingerprint))

    def _on_cancel_clicked(self) -> None:
        self.confirm.hide()
        if self.changes is not None:
            self.restore_requested.emit(UndoRequest(self.changes.turn_id, kind=CANCEL))
