"""Preferences > Agents: environment variables (secrets masked), overrides reaching the next run,
and a Test cancelled by closing the window."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil
from PySide6.QtWidgets import (
    QCheckBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
)
from pytestqt.qtbot import QtBot
from redact_cases import PLAIN_NAMES, SECRET_NAMES
from ui.settingshelpers import (
    FAKE_AGENT,
    add_custom_agent,
    child,
    close_preferences,
    open_preferences,
    pick_agent,
    select_agent,
    type_into,
)
from ui.uihelpers import StartApp

from tolaria.config.agents import MASK, load_overrides
from tolaria.ui.settings.env_table import EnvTable


def test_the_table_hides_exactly_what_the_secret_policy_calls_secret(qtbot: QtBot) -> None:
    """The shared names (tests/redact_cases.py): ``GH_PAT`` hidden here is hidden everywhere."""
    table = EnvTable()
    qtbot.addWidget(table)
    names = SECRET_NAMES + PLAIN_NAMES
    table.set_env({name: f"value-of-{name}" for name in names})
    shown = {name: table.displayed_value(row) for row, name in enumerate(names)}
    assert shown == {name: MASK if name in SECRET_NAMES else f"value-of-{name}" for name in names}


def cell(table: QTableWidget, row: int, column: int) -> QTableWidgetItem:
    item = table.item(row, column)
    assert item is not None, f"no cell {row},{column}"
    return item


def test_secret_values_are_masked_until_revealed_and_overrides_reach_the_next_run(
        start_app: StartApp, qtbot: QtBot, home: Path, tmp_path: Path) -> None:
    drv = start_app()
    add_custom_agent(drv, qtbot, "env-cli",
                     [sys.executable, str(FAKE_AGENT), "print_env", "{prompt}"])
    dialog = open_preferences(drv)
    select_agent(dialog, "env-cli")
    table = child(dialog, QTableWidget, "envTable")
    child(dialog, QPushButton, "envAddButton").click()
    cell(table, 0, 0).setText("MY_API_KEY")
    cell(table, 0, 1).setText("s3cret-value")
    child(dialog, QPushButton, "envAddButton").click()
    cell(table, 1, 0).setText("PLAIN")
    cell(table, 1, 1).setText("${HOME}/x")
    assert cell(table, 0, 1).text() == MASK, "a secret-looking value is masked"
    assert cell(table, 1, 1).text() == "${HOME}/x"
    reveal = child(dialog, QCheckBox, "envReveal")
    reveal.click()
    assert cell(table, 0, 1).text() == "s3cret-value"
    reveal.click()
    assert cell(table, 0, 1).text() == MASK
    type_into(child(dialog, QLineEdit, "agentExtraArgs"), "--extra 'two words'")
    folder = tmp_path / "agent-folder"
    folder.mkdir()
    type_into(child(dialog, QLineEdit, "agentCwd"), str(folder))
    child(dialog, QPushButton, "settingsSave").click()
    assert child(dialog, QLabel, "settingsSaveError").isHidden()
    saved = load_overrides()[0]["env-cli"]
    assert dict(saved.env) == {"MY_API_KEY": "s3cret-value", "PLAIN": "${HOME}/x"}
    assert saved.extra_args == ("--extra", "two words")
    assert "s3cret-value" not in repr(saved)
    close_preferences(drv, dialog, qtbot)

    # A new chat with this agent starts in its default folder and runs with the extra arguments.
    pick_agent(drv, "env-cli")
    drv.window.new_action.trigger()
    qtbot.waitUntil(lambda: drv.stored_conversation(
        drv.pane.conversation_id).cwd == str(folder))
    drv.send("show me")
    turn = drv.wait_finished()
    assert turn.status == "completed"
    printed = json.loads(next(line for line in turn.text().splitlines() if line.startswith("{")))
    assert printed["argv"][-2:] == ["--extra", "two words"], "one argument each, no shell"


def test_closing_the_window_cancels_a_running_test(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    add_custom_agent(drv, qtbot, "hang-cli", [sys.executable, str(FAKE_AGENT), "hang", "{prompt}"])
    dialog = open_preferences(drv)
    select_agent(dialog, "hang-cli")
    button = child(dialog, QPushButton, "agentTestButton")
    button.click()
    qtbot.waitUntil(lambda: any("fake_agent.py" in " ".join(c) and "hang" in c
                                for c in _child_cmdlines()), timeout=10_000)
    dialog.close()
    qtbot.waitUntil(lambda: not drv.app.settings_controller.testing("hang-cli"), timeout=10_000)
    qtbot.waitUntil(lambda: not [c for c in _child_cmdlines() if "hang" in c], timeout=10_000)
    assert "cancelled" in child(dialog, QLabel, "agentTestResult").text()


def _child_cmdlines() -> list[list[str]]:
    """Command lines of our live descendants (a process may exit while we look)."""
    out = []
    for proc in psutil.Process().children(recursive=True):
        try:
            out.append(proc.cmdline())
        except psutil.Error:
            continue
    return out
