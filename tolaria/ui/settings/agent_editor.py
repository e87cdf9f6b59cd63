"""The form for one agent: enable, what was detected, and the overrides the next run uses.

Extra arguments are edited as one line split shell-like (``shlex``) for display only: they are
stored and passed as a list, never through a shell. Every field is checked as you type
(``validate_overrides``) and shows its own message.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.config.agents import AgentOverrides, join_args, split_args, validate_overrides
from tolaria.config.probe import TEST_PROMPT
from tolaria.core.adapters.manifest import OPENAI_CHAT, Manifest
from tolaria.core.programs.discovery import Detection
from tolaria.ui import theme
from tolaria.ui.chat.agent_status import READY, agent_status
from tolaria.ui.settings.env_table import EnvTable
from tolaria.ui.settings.fields import (
    ErrorLabel,
    PathField,
    error_text_color,
    muted,
    title_label,
    with_error_label,
)

#: The override fields that have their own error label.
FIELDS = ("path", "extra_args", "env", "model", "permission_mode", "cwd")


def field_of(key: str) -> str:
    """``env.API_KEY`` / ``extra_args[2]`` -> the form field that shows the message."""
    base = key.split(".", 1)[0].split("[", 1)[0]
    return base if base in FIELDS else "general"


class AgentEditor(QWidget):
    #: Something was edited (the page keeps the pending overrides).
    changed = Signal()
    #: Run the Test of this agent with the form's overrides.
    test_requested = Signal()
    #: Stop the running Test of this agent (its run and process tree).
    test_cancel_requested = Signal()
    #: Fetch the model list of this (openai-chat) agent.
    models_requested = Signal()
    #: Edit this custom agent's manifest (id, command, protocol).
    edit_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("agentEditor")
        self.manifest: Manifest | None = None
        self._filling = False
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.title = title_label(self, "agentTitle")
        outer.addWidget(self.title)
        self.description = muted(QLabel(self))
        outer.addWidget(self.description)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        outer.addLayout(form)
        self.enabled = QCheckBox("Show this agent in the chat window's picker", self)
        self.enabled.setObjectName("agentEnabled")
        self.enabled.toggled.connect(self._on_field_edited)
        form.addRow("Enabled", self.enabled)
        protocol_row = QHBoxLayout()
        self.protocol = QLabel(self)
        self.protocol.setObjectName("agentProtocol")
        protocol_row.addWidget(self.protocol, 1)
        self.edit_button = QPushButton("Edit agent…", self)
        self.edit_button.setObjectName("agentEditButton")
        self.edit_button.setAutoDefault(False)
        self.edit_button.clicked.connect(self.edit_requested)
        protocol_row.addWidget(self.edit_button)
        form.addRow("Protocol", protocol_row)
        self.detected = QLabel(self)
        self.detected.setObjectName("agentDetected")
        self.detected.setWordWrap(True)
        form.addRow("Detected", self.detected)
        step_row = QHBoxLayout()
        self.next_step = QLabel(self)
        self.next_step.setObjectName("agentNextStep")
        self.next_step.setWordWrap(True)
        self.next_step.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        step_row.addWidget(self.next_step, 1)
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setObjectName("agentCopyCommand")
        self.copy_button.setAutoDefault(False)
        self.copy_button.clicked.connect(self._on_copy_button_clicked)
        step_row.addWidget(self.copy_button)
        self._step_label = QLabel("Next step", self)
        form.addRow(self._step_label, step_row)
        self._command = ""
        self._show_next_step(None)

        self.path = PathField("agentPath", "Found automatically", folder=False, parent=self)
        self.path.edited.connect(self._on_field_edited)
        self.errors: dict[str, ErrorLabel] = {}
        form.addRow("Program", self._with_error(self.path, "path"))
        self.extra_args = QLineEdit(self)
        self.extra_args.setObjectName("agentExtraArgs")
        self.extra_args.setPlaceholderText("e.g. --verbose --max-turns 5 (split like a shell, "
                                           "never run by one)")
        self.extra_args.textEdited.connect(self._on_field_edited)
        form.addRow("Extra arguments", self._with_error(self.extra_args, "extra_args"))
        self.env = EnvTable(self)
        self.env.changed.connect(self._on_field_edited)
        form.addRow("Environment", self._with_error(self.env, "env"))
        model_row = QHBoxLayout()
        self.model = QComboBox(self)
        self.model.setObjectName("agentModel")
        self.model.setEditable(True)
        self.model.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.model.setMinimumContentsLength(20)
        self.model.editTextChanged.connect(self._on_field_edited)
        model_row.addWidget(self.model, 1)
        self.models_button = QPushButton("List models", self)
        self.models_button.setObjectName("agentModelsButton")
        self.models_button.setAutoDefault(False)
        self.models_button.clicked.connect(self.models_requested)
        model_row.addWidget(self.models_button)
        model_box = QWidget(self)
        model_box.setLayout(model_row)
        model_row.setContentsMargins(0, 0, 0, 0)
        form.addRow("Model", self._with_error(model_box, "model"))
        self.permission = QComboBox(self)
        self.permission.setObjectName("agentPermission")
        self.permission.addItem("Agent's default", None)
        self.permission.addItem("Safe: ask before acting", "safe")
        self.permission.addItem("Full: allow everything", "full")
        self.permission.currentIndexChanged.connect(self._on_field_edited)
        form.addRow("Permissions", self._with_error(self.permission, "permission_mode"))
        self.cwd = PathField("agentCwd", "The folder Tolaria was started in", folder=True,
                             parent=self)
        self.cwd.edited.connect(self._on_field_edited)
        form.addRow("Working folder", self._with_error(self.cwd, "cwd"))
        self.general_error = ErrorLabel("agentGeneralError", self)
        outer.addWidget(self.general_error)
        self.errors["general"] = self.general_error

        test_row = QHBoxLayout()
        #: Where the Test runs: this computer, or a configured host (through the remote launch).
        self.test_host = QComboBox(self)
        self.test_host.setObjectName("agentTestHost")
        self.test_host.setAccessibleName("Test on")
        self.test_host.setToolTip("Where the Test runs: here, or on a host through your ssh "
                                  "(the agent found there as a chat there finds it)")
        self.set_test_hosts([])
        test_row.addWidget(self.test_host)
        self.test_button = QPushButton("Test", self)
        self.test_button.setObjectName("agentTestButton")
        self.test_button.setAutoDefault(False)
        self.test_button.setToolTip("Run the version probe and a tiny real turn (\"Reply with "
                                    "OK\") with these settings")
        self.test_button.clicked.connect(self._on_test_button_clicked)
        test_row.addWidget(self.test_button)
        self.cancel_test_button = QPushButton("Cancel", self)
        self.cancel_test_button.setObjectName("agentTestCancel")
        self.cancel_test_button.setAutoDefault(False)
        self.cancel_test_button.setToolTip("Stop the test run (its whole process tree)")
        self.cancel_test_button.clicked.connect(self.test_cancel_requested)
        self.cancel_test_button.hide()
        test_row.addWidget(self.cancel_test_button)
        self._test_started = 0.0
        self._test_clock = QTimer(self)
        self._test_clock.setInterval(1000)
        self._test_clock.timeout.connect(self._show_test_elapsed)
        self.test_result = QLabel(self)
        self.test_result.setObjectName("agentTestResult")
        self.test_result.setWordWrap(True)
        test_row.addWidget(self.test_result, 1)
        outer.addLayout(test_row)
        outer.addStretch(1)

    def set_test_hosts(self, hosts: list[str]) -> None:
        """The configured hosts a Test can run on (the chosen one kept when still there)."""
        chosen = self.test_host.currentData() or ""
        self.test_host.clear()
        self.test_host.addItem("On this computer", "")
        for host in hosts:
            self.test_host.addItem(f"On {host}", host)
        self.test_host.setCurrentIndex(max(self.test_host.findData(chosen), 0))
        self.test_host.setVisible(bool(hosts))

    def _with_error(self, field: QWidget, name: str) -> QWidget:
        box, self.errors[name] = with_error_label(self, field, name)
        return box

    # -- facts --------------------------------------------------------------------------------
    def show_agent(self, manifest: Manifest, overrides: AgentOverrides, can_list_models: bool,
                   testing: bool) -> None:
        self.manifest = manifest
        self._filling = True
        kind = "built-in" if manifest.builtin else f"custom ({manifest.source})"
        self.title.setText(manifest.name)
        self.description.setText(f"{manifest.id} · {kind}"
                                 + (f"\n{manifest.description}" if manifest.description else ""))
        self.protocol.setText(manifest.protocol + ("  (fixed for built-in agents)"
                                                   if manifest.builtin else ""))
        self.edit_button.setVisible(not manifest.builtin)
        self.enabled.setChecked(overrides.enabled)
        self.path.set_text(overrides.path or "")
        self.extra_args.setText(join_args(overrides.extra_args))
        self.env.set_env(overrides.env)
        self.model.clear()
        self.model.setEditText(overrides.model or "")
        line = self.model.lineEdit()
        if line is not None:
            line.setPlaceholderText(manifest.model or "The agent's default")
        self.models_button.setVisible(can_list_models)
        # Only what this agent can take is editable (validate_overrides says the same).
        chat = manifest.protocol == OPENAI_CHAT
        takes_model = chat or bool(getattr(manifest, "model_args", ()))
        self.model.setEnabled(takes_model or bool(overrides.model))
        self.model.setToolTip("" if takes_model else "This agent's manifest has no model_args, "
                              "so Tolaria cannot tell it which model to use")
        for widget in (self.path, self.extra_args):
            widget.setEnabled(not chat or bool(overrides.path or overrides.extra_args))
            widget.setToolTip("A model endpoint runs no program" if chat else "")
        index = self.permission.findData(overrides.permission_mode)
        self.permission.setCurrentIndex(max(index, 0))
        self.cwd.set_text(overrides.cwd or "")
        self.detected.setText("Detecting…")
        self.test_result.clear()
        if chat:  # a model endpoint is reached from this computer, whatever the chat's host
            self.test_host.setCurrentIndex(0)
        self.test_host.setEnabled(not chat)
        if testing:
            self.show_test_started()
        else:
            self._show_testing(False)
        self._filling = False
        self.validate()

    def _show_next_step(self, found: Detection | None) -> None:
        status = agent_status(self.manifest, found) if self.manifest is not None else None
        line = status.line if status is not None and status.group != READY else ""
        self._command = status.command if status is not None and line else ""
        self.next_step.setText(line)
        self.copy_button.setVisible(bool(self._command))
        self.copy_button.setToolTip(f"Copy “{self._command}”" if self._command else "")
        self.next_step.setVisible(bool(line))
        self._step_label.setVisible(bool(line))

    def _on_copy_button_clicked(self) -> None:
        clipboard = QApplication.clipboard()
        if self._command and clipboard is not None:
            clipboard.setText(self._command)
            self.copy_button.setText("Copied")

    def show_detection(self, found: Detection | None) -> None:
        self.copy_button.setText("Copy")
        self._show_next_step(found)
        if found is None:
            self.detected.setText("Detecting…")
            return
        if found.path is None:  # the next step says what to do; the search is a detail
            program = self.manifest.command[0] if self.manifest and self.manifest.command else ""
            self.detected.setText(f"not installed: no {program} found" if program
                                  else "not installed")
            self.detected.setToolTip(found.error or "")
            return
        self.detected.setToolTip("")
        lines = []
        if found.path:
            where = found.path
            if found.native and found.found_at:
                where += f"\n(native binary behind {found.found_at})"
            lines.append(where)
        details = ", ".join(x for x in (found.version and f"version {found.version}",
                                        found.source and f"found via {found.source}") if x)
        if details:
            lines.append(details)
        if found.error:
            lines.append(f"⚠ {found.error}")
        self.detected.setText("\n".join(lines) or "not found")

    def _show_testing(self, testing: bool) -> None:
        self.test_button.setEnabled(not testing)
        self.test_button.setText("Testing…" if testing else "Test")
        self.cancel_test_button.setVisible(testing)
        if testing:
            self._test_clock.start()
        else:
            self._test_clock.stop()

    def show_test_started(self) -> None:
        self._test_started = time.monotonic()
        self._show_testing(True)
        theme.follow(self.test_result, str)
        self._show_test_elapsed()

    def _show_test_elapsed(self) -> None:
        elapsed = int(time.monotonic() - self._test_started)
        self.test_result.setText(f"Testing… {elapsed} s — a version check, then a tiny turn "
                                 f"(\"{TEST_PROMPT}\")")

    def show_test_result(self, ok: bool, text: str) -> None:
        self._show_testing(False)
        theme.follow_color(self.test_result, theme.success_color if ok else error_text_color)
        self.test_result.setText(text)

    def show_models(self, models: Sequence[str], error: str) -> None:
        typed = self.model.currentText()
        self._filling = True
        self.model.clear()
        self.model.addItems(list(models))
        self.model.setEditText(typed)
        self._filling = False
        if error:
            self.errors["model"].show_message(f"Could not list models: {error}")

    # -- the form's value ---------------------------------------------------------------------
    def overrides(self) -> tuple[AgentOverrides, list[tuple[str, str]]]:
        """What the form says, and its problems as (field, message)."""
        problems: list[tuple[str, str]] = []
        try:
            args = split_args(self.extra_args.text())
        except ValueError as exc:
            problems.append(("extra_args", str(exc)))
            args = ()
        env: dict[str, str] = {}
        for name, value in self.env.env():
            if not name:
                problems.append(("env", "every variable needs a name"))
            elif name in env:
                problems.append(("env", f"{name} is listed twice"))
            env[name] = value
        model = self.model.currentText().strip() or None
        permission = self.permission.currentData()
        overrides = AgentOverrides(
            enabled=self.enabled.isChecked(), path=self.path.text() or None, extra_args=args,
            env=env, model=model,
            permission_mode=permission if isinstance(permission, str) else None,
            cwd=self.cwd.text() or None)
        return overrides, problems + list(validate_overrides(overrides, self.manifest))

    def validate(self) -> bool:
        _overrides, problems = self.overrides()
        messages: dict[str, list[str]] = {}
        for key, message in problems:
            field = field_of(key)
            messages.setdefault(field, []).append(
                message if field == key or key in message else f"{key}: {message}")
        for name, label in self.errors.items():
            label.show_message("\n".join(messages.get(name, [])))
        return not problems

    # -- intents ------------------------------------------------------------------------------
    def _on_field_edited(self, *_: object) -> None:
        if self._filling:
            return
        self.validate()
        self.changed.emit()

    def _on_test_button_clicked(self) -> None:
        if self.validate():
            self.test_requested.emit()
