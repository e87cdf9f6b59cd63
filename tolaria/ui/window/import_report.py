"""The inline, non-modal report of "Import sessions from CLIs…": a bar above the chat saying that
the import runs, then how many chats came from which CLI and which files were skipped and why.
It never takes the keyboard and stays until closed (or the next import), so the user can read
the skipped files while working on. The same bar carries the one-line notes of a chat's git
worktree (made, removed, or kept because it has uncommitted work)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from tolaria.chats.importers import IMPORTERS
from tolaria.chats.importing import ImportReport
from tolaria.ui import theme

#: Skipped files named one by one at most (the rest counted).
MAX_SKIPPED = 8


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def describe(report: ImportReport, home: Path | None = None) -> tuple[str, list[str]]:
    """(the headline, one line per skipped file) for ``report``."""
    per_agent = Counter(item.agent for item in report.imported)
    if per_agent:
        where = ", ".join(f"{count} from {IMPORTERS[agent].label}"
                          for agent, count in sorted(per_agent.items(),
                                                     key=lambda kv: (-kv[1], list(IMPORTERS).index(kv[0]))))
        head = f"{_plural(len(report.imported), 'chat')} imported: {where}"
    else:
        head = "Nothing new to import"
    extras = []
    continued = sum(item.turns_updated for item in report.imported)
    if continued:
        extras.append(f"{_plural(continued, 'turn')} continued")
    unfinished = sum(item.turns_unfinished for item in report.imported)
    if unfinished:
        extras.append(f"{_plural(unfinished, 'turn')} not answered yet (interrupted)")
    if report.unchanged:
        extras.append(f"{_plural(report.unchanged, 'session')} already here")
    if report.skipped:
        extras.append(f"{_plural(len(report.skipped), 'file')} skipped")
    if report.bad_lines:
        extras.append(f"{_plural(report.bad_lines, 'unreadable line')} left out")
    if extras:
        head += " · " + ", ".join(extras)
    lines: list[str] = []
    for path, why in report.skipped[:MAX_SKIPPED]:
        shown = path
        if home is not None and path.is_relative_to(home):
            shown = Path("~") / path.relative_to(home)
        lines.append(f"Skipped {shown}: {why}")
    if len(report.skipped) > MAX_SKIPPED:
        lines.append(f"… and {len(report.skipped) - MAX_SKIPPED} more skipped files")
    return head, lines


class ImportReportBar(QFrame):
    """Says an import runs, then its report; closed with ✕. An import from a host says where
    it looks and can be cancelled."""

    #: Cancel the running import from a host (its ssh client is killed).
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("importReport")
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        theme.follow(self, lambda: (
            f"QFrame#importReport {{ border: 1px solid {theme.css(theme.border())};"
            f" border-radius: 8px; background: {theme.css(theme.card_background())}; }}"
            f"QLabel#importReportDetails {{ color: {theme.css(theme.muted_text())}; }}"
            f"QPushButton#importReportClose {{ border: none; padding: 0px 6px; }}"))
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 6, 6)
        column = QVBoxLayout()
        column.setSpacing(2)
        self.headline = QLabel(self)
        self.headline.setObjectName("importReportHeadline")
        self.headline.setWordWrap(True)
        self.headline.setTextFormat(Qt.TextFormat.PlainText)
        column.addWidget(self.headline)
        self.details = QLabel(self)
        self.details.setObjectName("importReportDetails")
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.PlainText)  # file paths and parser messages
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        column.addWidget(self.details)
        row.addLayout(column, 1)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setObjectName("importReportCancel")
        self.cancel_button.setToolTip("Stop looking on the host (nothing is imported)")
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.cancel_button.hide()
        row.addWidget(self.cancel_button, 0, Qt.AlignmentFlag.AlignTop)
        self.close_button = QPushButton("✕", self)
        self.close_button.setObjectName("importReportClose")
        self.close_button.setToolTip("Close this report")
        self.close_button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.close_button.clicked.connect(self.hide)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.running = False
        #: Where the running or last import looked ("" this computer).
        self.host = ""
        self.hide()

    def show_running(self) -> None:
        self.running = True
        self.host = ""
        self.cancel_button.hide()
        labels = [importer.label for importer in IMPORTERS.values()]
        self.headline.setText(f"Importing sessions from {', '.join(labels[:-1])} and "
                              f"{labels[-1]}…")
        self.details.hide()
        self.close_button.hide()
        self.show()

    def show_looking(self, host: str) -> None:
        """An import from ``host`` runs: where it looks, and Cancel."""
        self.running = True
        self.host = host
        self.headline.setText(f"Looking on {host} for the sessions of its agent CLIs…")
        self.details.setText("ssh may ask for a passphrase or a host key first.")
        self.details.show()
        self.close_button.hide()
        self.cancel_button.show()
        self.show()

    def show_note(self, text: str) -> None:
        """A one-line note of another window-wide action (a chat's git worktree); while an
        import runs, under its line (the import keeps its state and Cancel)."""
        if self.running:
            self.details.setText(text)
            self.details.show()
            return
        self.running = False
        self.cancel_button.hide()
        self.headline.setText(text)
        self.details.hide()
        self.close_button.show()
        self.show()

    def show_report(self, report: ImportReport | None, error: str = "",
                    home: Path | None = None) -> None:
        self.running = False
        self.cancel_button.hide()
        lines: list[str] = []
        if report is None and self.host and error == "cancelled":
            head = f"Import from {self.host} cancelled: nothing was imported"
        elif report is None:
            head = f"Import from {self.host} failed: {error}" if self.host \
                else f"Import failed: {error}"
        else:
            head, lines = describe(report, home)
            if self.host:
                head = f"From {self.host}: {head[0].lower()}{head[1:]}"
        self.headline.setText(head)
        self.details.setText("\n".join(lines))
        self.details.setVisible(bool(lines))
        self.close_button.show()
        self.show()
