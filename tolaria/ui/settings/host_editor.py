"""The form of one host (Preferences → Hosts): how Tolaria reaches it and what its agents get
there. Each field has its error line under it, filled from the same checks a save makes
(``config/remote_hosts_edit.host_problems``: the run's own parsers), so bad input is said
beside the field as it is typed and nothing is written until it is right."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.config.remote_hosts_edit import TEXT_FIELDS, HostEntry, host_problems
from tolaria.ui.settings.env_table import EnvTable
from tolaria.ui.settings.fields import ErrorLabel, muted, title_label, with_error_label

SSH, COMMAND = "ssh", "command"
_PLACEHOLDERS = {
    "name": "an ssh alias, user@host or ssh://user@host:port",
    "command": "docker exec -i CONTAINER, kubectl exec -i POD --, wsl -d Ubuntu --",
    "ssh_command": "ssh (the one on PATH), or a path with options",
    "ssh_config": "~/.ssh/config (ssh -F FILE)",
    "python": "python3 (3.8 or newer, on the host)",
    "cache_dir": "~/.cache/tolaria/remote (on the host)",
    "disconnect_seconds": "3",
}
_LABELS = {
    "name": "Destination", "command": "Command", "ssh_command": "ssh command",
    "ssh_config": "ssh config file", "python": "Python there", "cache_dir": "Cache folder there",
    "disconnect_seconds": "End the run after (s)",
}


class HostEditor(QWidget):
    #: A field was edited.
    changed = Signal()
    #: Save the host as the form says.
    save_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hostEditor")
        layout = QVBoxLayout(self)
        self.title = title_label(self, "hostTitle")
        layout.addWidget(self.title)
        form = self.form = QFormLayout()
        layout.addLayout(form)
        self.kind = QComboBox(self)
        self.kind.setObjectName("hostKind")
        self.kind.addItem("ssh (your own ssh, its config, keys and agent)", SSH)
        self.kind.addItem("a command (a container, a pod, WSL)", COMMAND)
        self.kind.currentIndexChanged.connect(self._on_kind_changed)
        self.edits: dict[str, QLineEdit] = {}
        self.errors: dict[str, ErrorLabel] = {}
        self.rows: dict[str, QWidget] = {}
        self._add_text(form, "name")
        form.addRow("Reached through", self.kind)
        for key in (*TEXT_FIELDS, "disconnect_seconds"):
            self._add_text(form, key)
        self.env = EnvTable(self, name="hostEnv", what="Environment on the host")
        self.env.table.setHorizontalHeaderLabels(["Name", "Value"])
        self.env.changed.connect(self._on_edited)
        box, self.errors["env"] = with_error_label(self, self.env, "hostEnv")
        form.addRow("Environment", box)
        self.programs = EnvTable(self, name="hostPrograms", what="Agent programs on the host",
                                 add_text="Add program")
        self.programs.table.setHorizontalHeaderLabels(["Agent id", "Program on the host"])
        self.programs.reveal.hide()  # paths, not secrets
        self.programs.changed.connect(self._on_edited)
        box, self.errors["programs"] = with_error_label(self, self.programs, "hostPrograms")
        form.addRow("Agent programs", box)
        form.addRow("", muted(QLabel(
            "Agents are found on the host as a run finds them: this environment applied, then "
            "PATH, then the login shell. A program set here is used as it is.", self)))
        row = QHBoxLayout()
        self.general_error = ErrorLabel("hostSaveError", self)
        row.addWidget(self.general_error, 1)
        self.save_button = QPushButton("Save host", self)
        self.save_button.setObjectName("hostSave")
        self.save_button.setAutoDefault(False)
        self.save_button.clicked.connect(self._on_save_clicked)
        row.addWidget(self.save_button)
        layout.addLayout(row)
        layout.addStretch(1)
        self._filling = False

    def _add_text(self, form: QFormLayout, key: str) -> None:
        edit = QLineEdit(self)
        edit.setObjectName(f"host_{key}")
        edit.setPlaceholderText(_PLACEHOLDERS[key])
        edit.setClearButtonEnabled(True)
        edit.textEdited.connect(lambda _t: self._on_edited())
        box, self.errors[key] = with_error_label(self, edit, f"host_{key}", reserve=True)
        self.edits[key] = edit
        self.rows[key] = box
        form.addRow(_LABELS[key], box)

    # -- facts --------------------------------------------------------------------------------
    def set_entry(self, entry: HostEntry, title: str) -> None:
        self._filling = True
        self.title.setText(title)
        self.edits["name"].setText(entry.name)
        for key in (*TEXT_FIELDS, "disconnect_seconds"):
            self.edits[key].setText(getattr(entry, key))
        self.kind.setCurrentIndex(1 if entry.command else 0)
        self.env.set_env(dict(entry.env))
        self.programs.set_env(dict(entry.programs))
        self.general_error.show_message("")
        self._filling = False
        self._on_kind_changed()
        self.check()

    def entry(self) -> HostEntry:
        """The host as the form says now."""
        texts = {key: self.edits[key].text() for key in (*TEXT_FIELDS, "disconnect_seconds")}
        if self.kind.currentData() != COMMAND:
            texts["command"] = ""
        return HostEntry(self.edits["name"].text().strip(), **texts,
                         env=tuple(self.env.env()), programs=tuple(self.programs.env()))

    def check(self) -> list[tuple[str, str]]:
        """Say each field's problem beside it; the problems."""
        problems = host_problems(self.entry())
        if self.kind.currentData() == COMMAND and not self.edits["command"].text().strip():
            problems.append(("command", "give the command that reaches the host, e.g. docker "
                                        "exec -i CONTAINER"))
        by_field: dict[str, str] = {}
        for field, message in problems:
            by_field.setdefault(field, message)
        for field, label in self.errors.items():
            label.show_message(by_field.get(field, ""))
        self.save_button.setEnabled(not problems)
        return problems

    def show_problems(self, problems: list[tuple[str, str]]) -> None:
        """A refused save: each problem beside its field (others on the general line)."""
        general = [m for f, m in problems if f not in self.errors]
        for field, message in problems:
            if field in self.errors:
                self.errors[field].show_message(message)
        self.general_error.show_message("; ".join(general))

    # -- internals ----------------------------------------------------------------------------
    def _on_kind_changed(self, _index: int = 0) -> None:
        command = self.kind.currentData() == COMMAND
        self.form.setRowVisible(self.rows["command"], command)
        for key in ("ssh_command", "ssh_config"):
            self.rows[key].setEnabled(not command)
        self.edits["name"].setPlaceholderText("a name for it, e.g. box" if command
                                              else _PLACEHOLDERS["name"])
        if not self._filling:
            self._on_edited()

    def _on_edited(self) -> None:
        if self._filling:
            return
        self.check()
        self.changed.emit()

    def _on_save_clicked(self) -> None:
        if not self.check():
            self.save_requested.emit()
