"""File → Export…: a save dialog for the current chat, opened with ``open()`` (never ``exec()``:
no nested loop under qasync), whose choice becomes ``export_requested``. The format follows the
file's extension, else the chosen filter (HTML when neither says)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

#: Name filter -> (format, extension).
FILTERS = {"Web page, one file (*.html)": ("html", ".html"),
           "Markdown (*.md)": ("md", ".md"),
           "JSON for scripts (*.json)": ("json", ".json")}
_EXTENSIONS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".json": "json"}


def file_stem(title: str) -> str:
    """A file name from a chat's title: letters, digits, dashes; at most 60 characters."""
    stem = re.sub(r"[^\w-]+", "-", title, flags=re.UNICODE).strip("-_")[:60].strip("-_")
    return stem or "chat"


class ExportDialog(QObject):
    """One save dialog for one chat; ``chosen`` once the user picked a file."""

    #: The user chose where to export: conversation id, format (html, md, json), path.
    chosen = Signal(int, str, str)

    def __init__(self, parent: QWidget, conversation_id: int, title: str,
                 folder: str | None = None) -> None:
        super().__init__(parent)
        self.conversation_id = conversation_id
        self.dialog = QFileDialog(parent, "Export chat")
        self.dialog.setObjectName("exportDialog")
        self.dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        self.dialog.setFileMode(QFileDialog.FileMode.AnyFile)
        self.dialog.setNameFilters(list(FILTERS))
        self.dialog.setDirectory(folder if folder and os.path.isdir(folder)
                                 else os.path.expanduser("~"))
        self.dialog.selectFile(file_stem(title) + ".html")
        self.dialog.filterSelected.connect(self._on_dialog_filter_selected)
        self.dialog.fileSelected.connect(self._on_dialog_file_selected)

    def open(self) -> None:
        self.dialog.open()

    def _on_dialog_filter_selected(self, name_filter: str) -> None:
        """Another format chosen: the proposed file name's extension follows."""
        _fmt, extension = FILTERS.get(name_filter, ("html", ".html"))
        self.dialog.setDefaultSuffix(extension[1:])
        names = self.dialog.selectedFiles()
        if names:
            self.dialog.selectFile(Path(names[0]).stem + extension)

    def _on_dialog_file_selected(self, path: str) -> None:
        fmt = _EXTENSIONS.get(Path(path).suffix.lower())
        if fmt is None:
            fmt, extension = FILTERS.get(self.dialog.selectedNameFilter(), ("html", ".html"))
            path += extension
        self.chosen.emit(self.conversation_id, fmt, path)
