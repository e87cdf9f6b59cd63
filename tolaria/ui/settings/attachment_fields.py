"""The attachment caps of Preferences → Behaviour (issue 26): the most one attached file and all
of one chat's attachments may take (``[attachments] max_file_mb`` / ``max_chat_mb``, ADR 0028).

Typed as numbers of MB; a bad value (not a number, 0, over the limit, a chat cap below the file
cap) says what is wrong right under its field and holds Save, so nothing half-valid is written.
"""

from __future__ import annotations

import math
from dataclasses import replace

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFormLayout, QLineEdit, QWidget

from tolaria.config.settings import Settings
from tolaria.ui.settings.fields import ErrorLabel

_FIELD_WIDTH = 140
#: The settings file's own bounds (tolaria/config/settings.py ``_KEYS``).
MAX_FILE_MB = 4096.0
MAX_CHAT_MB = 1_000_000.0


def _shown(value: float) -> str:
    return f"{value:g}"


def parse_mb(text: str, most: float) -> tuple[float | None, str]:
    """A number of MB from the field, or None and why not (one line, naming the value)."""
    raw = text.strip().removesuffix("MB").removesuffix("mb").strip()
    if not raw:
        return None, "Type a number of MB"
    try:
        value = float(raw.replace(",", "."))
    except ValueError:
        return None, f"{text.strip()!r} is not a number of MB"
    if not math.isfinite(value) or value <= 0:
        return None, "Must be more than 0 MB"
    if value > most:
        return None, f"At most {_shown(most)} MB"
    return value, ""


class AttachmentFields(QWidget):
    """Two fields, each with its error under it; ``is_valid`` holds Save while one is wrong."""

    #: A value was changed.
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        self.per_file = self._field("attachMaxFileMb", "Per file", form)
        self.per_file_error = self._error("attachMaxFileError", form)
        self.per_chat = self._field("attachMaxChatMb", "Per chat", form)
        self.per_chat_error = self._error("attachMaxChatError", form)

    def _field(self, name: str, label: str, form: QFormLayout) -> QLineEdit:
        field = QLineEdit(self)
        field.setObjectName(name)
        field.setFixedWidth(_FIELD_WIDTH)
        field.setAccessibleName(f"Attachments: most MB {label.lower()}")
        field.setPlaceholderText("MB")
        field.textEdited.connect(self._on_field_text_edited)
        form.addRow(f"{label} (MB)", field)
        return field

    def _error(self, name: str, form: QFormLayout) -> ErrorLabel:
        error = ErrorLabel(name, self)
        form.addRow(error)  # the whole row: the message is never cut to the field's width
        return error

    def set_settings(self, settings: Settings) -> None:
        self.per_file.setText(_shown(settings.attach_max_file_mb))
        self.per_chat.setText(_shown(settings.attach_max_chat_mb))
        self.validate()

    def values(self) -> tuple[float | None, float | None]:
        per_file, _ = parse_mb(self.per_file.text(), MAX_FILE_MB)
        per_chat, _ = parse_mb(self.per_chat.text(), MAX_CHAT_MB)
        return per_file, per_chat

    def validate(self) -> bool:
        """Say what is wrong under each field; True when both are good."""
        per_file, file_problem = parse_mb(self.per_file.text(), MAX_FILE_MB)
        per_chat, chat_problem = parse_mb(self.per_chat.text(), MAX_CHAT_MB)
        if per_file is not None and per_chat is not None and per_chat < per_file:
            chat_problem = f"Less than the per-file cap ({_shown(per_file)} MB)"
        self.per_file_error.show_message(file_problem)
        self.per_chat_error.show_message(chat_problem)
        return not file_problem and not chat_problem

    def is_valid(self) -> bool:
        return self.validate()

    def apply(self, settings: Settings) -> Settings:
        """``settings`` with the caps typed (unchanged while a field is invalid)."""
        per_file, per_chat = self.values()
        if per_file is None or per_chat is None or not self.validate():
            return settings
        return replace(settings, attach_max_file_mb=per_file, attach_max_chat_mb=per_chat)

    def _on_field_text_edited(self, _text: str) -> None:
        self.validate()
        self.changed.emit()
