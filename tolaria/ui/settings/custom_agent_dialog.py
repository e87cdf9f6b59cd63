"""Add (or edit) a custom agent: a manifest from a template, checked as you type.

Each invalid field shows its message under it, in a line kept free for it (the fields never move
under the mouse as messages come and go), in plain words rather than the manifest's vocabulary;
Save stays disabled until every field is valid; nothing is written before Save
(``write_custom_agent`` is atomic).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.config.agents import (
    join_args,
    split_args,
    template_manifest,
    validate_manifest_fields,
)
from tolaria.core.adapters.manifest import OPENAI_CHAT, PROTOCOLS
from tolaria.ui import theme
from tolaria.ui.settings.fields import ErrorLabel, with_error_label

_CHAT_FIELDS = ("base_url", "model", "api_key_env")
_FIELDS = ("id", "name", "protocol", "command", *_CHAT_FIELDS)
_HINT = ("Type the command as you would in a terminal (it is not run by a shell). "
         "Put {prompt} where your message goes, or leave it out to send the message on the "
         "agent's input; {cwd} becomes the chat's folder.")
#: (field, start of the checker's message) -> what the form says instead.
_PLAIN = (
    ("id", "must be 1-64 characters", "Use lowercase letters, digits and dashes (e.g. my-agent)"),
    ("name", "must be a non-empty", "Give the agent a name"),
    ("command", "must be a non-empty list", "Type the command that starts the agent"),
    ("command", "cannot split the arguments", "A quote is not closed"),
    ("base_url", "must be an http", "Type the server's address, starting with http:// or "
                                    "https://"),
    ("model", "must be a non-empty", "Type the name of the model"),
    ("api_key_env", "must be the name of an environment variable",
     "Type the name of the variable that holds the key (e.g. MY_API_KEY), not the key itself"),
)


def plain_message(field: str, message: str) -> str:
    """The checker's message for ``field`` in the words of the form."""
    for key, start, plain in _PLAIN:
        if key == field and message.startswith(start):
            return plain
    return message


class CustomAgentDialog(QDialog):
    #: Write the manifest: data (the TOML table), id it replaces (or None for a new agent).
    save_requested = Signal(object, object)

    def __init__(self, data: dict[str, Any] | None = None, replace_id: str | None = None,
                 taken_ids: frozenset[str] = frozenset(),
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("customAgentDialog")
        self.setWindowTitle("Edit custom agent" if replace_id else "Add custom agent")
        self.setMinimumWidth(560)
        self.replace_id = replace_id
        self._taken = taken_ids - {replace_id} if replace_id else taken_ids
        self._data = dict(data) if data is not None else template_manifest("lines")
        layout = QVBoxLayout(self)
        hint = QLabel(_HINT, self)
        hint.setWordWrap(True)
        theme.follow_color(hint, theme.muted_text)
        layout.addWidget(hint)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        layout.addLayout(form)
        self._form = form
        self.errors: dict[str, ErrorLabel] = {}
        self.rows: dict[str, QWidget] = {}
        self.edits: dict[str, QLineEdit] = {}
        for key, label, placeholder in (
                ("id", "Id", "my-agent (a-z, 0-9 and -)"), ("name", "Name", "My agent")):
            self._line(form, key, label, placeholder)
        self.protocol = QComboBox(self)
        self.protocol.setObjectName("customProtocol")
        self.protocol.addItems(list(PROTOCOLS))
        self.protocol.currentIndexChanged.connect(self._on_protocol_changed)
        form.addRow("Protocol", self._with_error(self.protocol, "protocol"))
        self._line(form, "command", "Command", "my-agent --print {prompt}")
        self._line(form, "base_url", "Endpoint", "http://127.0.0.1:11434/v1")
        self._line(form, "model", "Model", "llama3.2")
        self._line(form, "api_key_env", "API key variable", "MY_API_KEY (the variable's name)")
        self.general = ErrorLabel("generalError", self, reserve=True)
        self.errors["general"] = self.general
        layout.addWidget(self.general)
        self.failure = ErrorLabel("customAgentFailure", self)
        layout.addWidget(self.failure)
        buttons = QDialogButtonBox(self)
        self.save_button = QPushButton("Save", self)
        self.save_button.setObjectName("customAgentSave")
        self.save_button.setDefault(True)
        buttons.addButton(self.save_button, QDialogButtonBox.ButtonRole.AcceptRole)
        cancel = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        cancel.setObjectName("customAgentCancel")
        self.save_button.clicked.connect(self._on_save_button_clicked)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self._fill()

    def _line(self, form: QFormLayout, key: str, label: str, placeholder: str) -> None:
        edit = QLineEdit(self)
        edit.setObjectName(f"custom_{key}")
        edit.setPlaceholderText(placeholder)
        edit.textEdited.connect(self._on_field_edited)
        self.edits[key] = edit
        form.addRow(label, self._with_error(edit, key))

    def _with_error(self, field: QWidget, key: str) -> QWidget:
        box, self.errors[key] = with_error_label(self, field, key, reserve=True)
        self.rows[key] = box
        return box

    def _fill(self) -> None:
        data = self._data
        for key in ("id", "name", "base_url", "model", "api_key_env"):
            self.edits[key].setText(str(data.get(key, "")))
        command = data.get("command")
        if isinstance(command, list):
            self.edits["command"].setText(join_args(tuple(str(p) for p in command)))
        index = self.protocol.findText(str(data.get("protocol", "lines")))
        self.protocol.blockSignals(True)
        self.protocol.setCurrentIndex(max(index, 0))
        self.protocol.blockSignals(False)
        self._show_protocol_fields()
        self.validate()

    # -- the form's value ---------------------------------------------------------------------
    def data(self) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        data = dict(self._data)
        problems: list[tuple[str, str]] = []
        for key in ("id", "name"):
            data[key] = self.edits[key].text().strip()
        protocol = self.protocol.currentText()
        data["protocol"] = protocol
        if protocol == OPENAI_CHAT:
            data.pop("command", None)
            data.pop("version_command", None)
            for key in _CHAT_FIELDS:
                value = self.edits[key].text().strip()
                if value or key != "api_key_env":
                    data[key] = value
                else:
                    data.pop(key, None)
        else:
            for key in _CHAT_FIELDS:
                data.pop(key, None)
            try:
                data["command"] = list(split_args(self.edits["command"].text()))
            except ValueError as exc:
                problems.append(("command", str(exc)))
                data["command"] = []
        return data, problems

    def validate(self) -> bool:
        data, problems = self.data()
        if not problems:
            problems = list(validate_manifest_fields(data, taken_ids=self._taken))
        messages: dict[str, list[str]] = {}
        for key, message in problems:
            field = key.split(".", 1)[0].split("[", 1)[0]
            if field not in self.errors or not self.rows[field].isVisibleTo(self):
                field = "general"
                message = f"{key}: {message}"
            messages.setdefault(field, []).append(plain_message(field, message))
        for name, label in self.errors.items():
            label.show_message("; ".join(messages.get(name, [])))
        self.save_button.setEnabled(not problems)
        self._fit_height()
        return not problems

    def _fit_height(self) -> None:
        """Grow (never shrink) so the word-wrapped messages under the fields are readable."""
        layout = self.layout()
        if layout is None:
            return
        layout.activate()
        need = (layout.totalHeightForWidth(self.width()) if layout.hasHeightForWidth()
                else layout.totalSizeHint().height())
        if need > self.height():
            self.resize(self.width(), need)

    def show_failure(self, message: str) -> None:
        self.failure.show_message(message)

    # -- intents ------------------------------------------------------------------------------
    def _show_protocol_fields(self) -> None:
        chat = self.protocol.currentText() == OPENAI_CHAT
        for key in _CHAT_FIELDS:
            self._set_row_visible(key, chat)
        self._set_row_visible("command", not chat)

    def _set_row_visible(self, key: str, visible: bool) -> None:
        self._form.setRowVisible(self.rows[key], visible)

    def _on_protocol_changed(self, _index: int) -> None:
        # Start from the new protocol's template: keys of the old one (a CLI's stop policy or
        # permission arguments) may mean nothing, or be invalid, for this one.
        protocol = self.protocol.currentText()
        try:
            template = template_manifest(protocol)
        except (KeyError, ValueError):
            template = {"protocol": protocol}
        kept: dict[str, Any] = {k: self._data[k] for k in ("description", "env")
                                if k in self._data}
        self._data = {**template, **kept}
        for key in (*_CHAT_FIELDS, "command"):
            if key in template and not self.edits[key].text():
                value = template[key]
                self.edits[key].setText(join_args(tuple(value)) if isinstance(value, list)
                                        else str(value))
        self._show_protocol_fields()
        self.validate()

    def _on_field_edited(self, _text: str) -> None:
        self.failure.show_message("")
        self.validate()

    def _on_save_button_clicked(self) -> None:
        if self.validate():
            data, _problems = self.data()
            self.save_requested.emit(data, self.replace_id)

    def done(self, result: int) -> None:
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        super().done(result)
