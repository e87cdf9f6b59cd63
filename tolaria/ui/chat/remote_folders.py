"""The working-folder picker of a chat on a host (issue 25.6): browses the host's folders.

The dialog only asks (``listing_requested``: a path there, "" for the home folder) and shows
what comes back (``show_listing`` / ``show_error``); the listing itself runs off the GUI thread
through the user's ssh (tolaria/qt/remote_folders.py, tolaria/core/remote/folders.py). A typed
path is checked there the same way: Enter lists it, so a bad one gets its one line at once.
"Choose" takes the folder shown (off while a typed path is not opened yet). Opened with ``open()``, never ``exec()``.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from tolaria.core.remote.folders import Listing
from tolaria.ui import theme
from tolaria.ui.settings.dialog import preferences_css

_GIT_MARK = "  · git"


class RemoteFolderDialog(QDialog):
    """Browse the folders of ``host`` and choose one."""

    #: List this folder on the host ("" for the home folder there).
    listing_requested = Signal(str)
    #: The user chose this folder (an absolute path on the host).
    folder_chosen = Signal(str)

    def __init__(self, host: str, start: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("remoteFolderDialog")
        self.setWindowTitle(f"Working folder on {host}")
        self.host = host
        self.shown: Listing | None = None
        self._asked = ""
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        title = QLabel(f"Working folder on {host}", self)
        title.setObjectName("remoteFolderTitle")
        title.setTextFormat(Qt.TextFormat.PlainText)
        font = title.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.15)
        title.setFont(font)
        layout.addWidget(title)
        row = QHBoxLayout()
        self.up = QPushButton("↑ Up", self)
        self.up.setObjectName("remoteFolderUp")
        self.up.setAccessibleName("Parent folder")
        self.up.setToolTip("The parent folder")
        self.up.clicked.connect(self._on_up_clicked)
        self.path = QLineEdit(self)
        self.path.setObjectName("remoteFolderPath")
        self.path.setAccessibleName(f"Folder on {host}")
        self.path.setPlaceholderText("~/project or /srv/app (Enter to open)")
        self.path.setText(start)
        self.path.returnPressed.connect(self._on_path_return_pressed)
        self.path.textEdited.connect(self._on_path_text_edited)
        go = QPushButton("Open", self)
        go.clicked.connect(self._on_path_return_pressed)
        row.addWidget(self.up)
        row.addWidget(self.path, 1)
        row.addWidget(go)
        layout.addLayout(row)
        self.folders = QListWidget(self)
        self.folders.setObjectName("remoteFolderList")
        self.folders.setAccessibleName(f"Folders on {host}")
        self.folders.itemActivated.connect(self._on_folders_item_activated)
        layout.addWidget(self.folders, 1)
        self.status = QLabel(self)
        self.status.setObjectName("remoteFolderStatus")
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # ssh's and the host's words
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.choose = self.buttons.addButton("Choose", QDialogButtonBox.ButtonRole.AcceptRole)
        self.choose.setObjectName("remoteFolderChoose")
        self.choose.setProperty("primary", True)  # the accent button, as in Preferences
        self.choose.setEnabled(False)
        self.buttons.accepted.connect(self._on_buttons_accepted)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self.resize(520, 420)
        # Preferences' look (rounded fields, list rows, the accent button), in the theme of the
        # moment.
        theme.follow(self, preferences_css)

    def start(self) -> None:
        """Open the dialog and list the start folder (or the home folder there)."""
        self.open()
        self.request(self.path.text().strip())

    def request(self, path: str) -> None:
        """Ask for ``path``'s listing; the dialog waits (a newer request wins)."""
        self._asked = path
        self._busy(True)
        self._say(f"Listing {path or '~'} on {self.host}…", error=False)
        self.listing_requested.emit(path)

    def show_listing(self, asked: str, listing: Listing) -> None:
        """The answer to the request for ``asked`` (ignored when a newer one is pending)."""
        if asked != self._asked:
            return
        self.shown = listing
        self.path.setText(listing.path)
        self.folders.clear()
        icon = self.style().standardIcon(QStyle.StandardPixmap.SP_DirIcon)
        for entry in listing.folders:
            item = QListWidgetItem(icon, entry.name + (_GIT_MARK if entry.is_git else ""))
            item.setData(Qt.ItemDataRole.UserRole, entry.name)
            item.setToolTip(f"{listing.path.rstrip('/')}/{entry.name}"
                            + (" (a git working tree)" if entry.is_git else ""))
            self.folders.addItem(item)
        count = len(listing.folders)
        note = f"{count} folder{'s' if count != 1 else ''}"
        if listing.cut:
            note += " (only the first ones are listed)"
        if listing.is_git:
            note += " · this folder is a git working tree (its turns get checkpoints)"
        self._say(note, error=False)
        self._busy(False)

    def show_error(self, asked: str, message: str) -> None:
        """Why ``asked`` could not be listed, in one line; the last good listing stays."""
        if asked != self._asked:
            return
        self._say(message, error=True)
        self._busy(False)
        self.choose.setEnabled(False)

    def _busy(self, busy: bool) -> None:
        self.choose.setEnabled(not busy and self.shown is not None)
        self.up.setEnabled(not busy and bool(self.shown and self.shown.parent
                                              and self.shown.parent != self.shown.path))
        self.folders.setEnabled(not busy)

    def _say(self, text: str, *, error: bool) -> None:
        theme.follow_color(self.status, theme.error_text if error else
                           lambda: theme.palette().placeholderText().color())
        self.status.setText(text)

    def _on_path_text_edited(self, _text: str) -> None:
        # Choose takes the folder shown, checked there: a typed one is opened first (Enter).
        self.choose.setEnabled(False)
        self._say(f"Enter opens the typed folder on {self.host}", error=False)

    def _on_up_clicked(self) -> None:
        if self.shown is not None and self.shown.parent:
            self.request(self.shown.parent)

    def _on_path_return_pressed(self) -> None:
        self.request(self.path.text().strip())

    def _on_folders_item_activated(self, item: QListWidgetItem) -> None:
        name = item.data(Qt.ItemDataRole.UserRole)
        if self.shown is not None and isinstance(name, str):
            self.request(f"{self.shown.path.rstrip('/')}/{name}")

    def _on_buttons_accepted(self) -> None:
        if self.shown is None:
            return
        self.folder_chosen.emit(self.shown.path)
        self.accept()
