"""Exporting a stored chat: one self-contained HTML file, Markdown, or one JSON document.

No Qt: ``tolaria export`` (tolaria/cli/export_cmd.py) and the window's File → Export
(tolaria/qt/export_control.py) both call ``export_chat`` / ``export_to_file``. The chat is read
a page of turns at a time and written as it is read (tolaria/chats/export/model.py), secrets
masked by the one policy (tolaria/support/redact.py). The JSON shape: docs/EXPORT.md.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import TextIO

from tolaria.chats.export.model import ChatNotFound, chat_header, iter_turns
from tolaria.core.store.db import Store

__all__ = ["FORMATS", "ChatNotFound", "ExportError", "export_chat", "export_to_file",
           "format_of"]

#: Format name -> the file extension it is written with.
FORMATS = {"html": ".html", "md": ".md", "json": ".json"}
_EXTENSIONS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".json": "json"}


class ExportError(Exception):
    """The export could not be written: one line saying why (the file is left as it was)."""


def format_of(path: str | Path, default: str = "html") -> str:
    """The format a file name asks for by its extension (``default`` when it says none)."""
    return _EXTENSIONS.get(Path(path).suffix.lower(), default)


def export_chat(store: Store, conversation_id: int, fmt: str, out: TextIO) -> None:
    """Write chat ``conversation_id`` to ``out`` as ``fmt`` (``html``, ``md`` or ``json``).
    ChatNotFound for an unknown chat, ValueError for an unknown format."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (use html, md or json)")
    head = chat_header(store, conversation_id)  # ChatNotFound before anything is written
    turns = iter_turns(store, conversation_id)
    if fmt == "json":
        from tolaria.chats.export.to_json import write_json

        write_json(head, turns, out)
    elif fmt == "md":
        from tolaria.chats.export.to_markdown import write_markdown

        write_markdown(head, turns, out)
    else:
        from tolaria.chats.export.to_html import write_html

        write_html(head, turns, out)


def export_to_file(store: Store, conversation_id: int, fmt: str, path: Path) -> Path:
    """Write the export to ``path`` atomically: a temporary file beside it, renamed over it once
    complete, so a reader never sees half a file and an existing file is replaced only by a
    whole new one. Returns the absolute path. ExportError (one line) when the folder is missing
    or not writable, or ``path`` is a folder; ChatNotFound for an unknown chat."""
    target = Path(os.path.abspath(path))
    if target.is_dir():
        raise ExportError(f"{target} is a folder: name the file to write")
    folder = target.parent
    if not folder.is_dir():
        raise ExportError(f"{folder} does not exist")
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=folder)
    except OSError as exc:
        raise ExportError(f"cannot write in {folder}: {exc.strerror or exc}") from exc
    try:
        # A lone surrogate (half an emoji an agent split) cannot be UTF-8: "?" in the file.
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace", newline="\n") as out:
            export_chat(store, conversation_id, fmt, out)
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(OSError):  # as an ordinary new file would be (mkstemp: 0600)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(temp, 0o666 & ~mask)
        os.replace(temp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from exc
        raise
    return target
