"""Preferences → Hosts and the Test on a host (issue 25 item 5), with the real window offscreen:
a host added, edited and removed through the form round-trips through settings.toml (hand
edits made meanwhile kept); bad input is said beside its field and leaves the file as it was;
secret-looking env values are masked; the agents page's Test runs on a chosen host through the
remote launch (the host's programs override used), and an unreachable host is one line, fast.
Pictures light and dark (``TOLARIA_DOCS_SHOTS=1``: docs/settings-hosts[-dark].png)."""

from __future__ import annotations

import os
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import (
    FAKE_AGENT,
    add_custom_agent,
    child,
    close_preferences,
    open_preferences,
    select_agent,
    type_into,
)
from ui.uihelpers import AppDriver, save_shot

from tolaria.ui import theme
from tolaria.ui.settings import SettingsDialog
from tolaria.ui.settings.hosts_page import NEW

Start = Callable[..., AppDriver]
ROOT = Path(__file__).resolve().parents[2]


def _hosts_page(drv: AppDriver) -> SettingsDialog:
    dialog = open_preferences(drv)
    dialog.tabs.setCurrentWidget(dialog.hosts)
    return dialog


def _error(dialog: SettingsDialog, field: str) -> str:
    return dialog.hosts.editor.errors[field].text()


def test_a_host_is_added_edited_and_removed_through_the_form(
        start_app: Start, home: Path, qtbot: QtBot, tmp_path: Path) -> None:
    settings = home / "settings.toml"
    settings.write_text('# mine\n[appearance]\ntheme = "light"\n')
    drv = start_app()
    dialog = _hosts_page(drv)
    page = dialog.hosts
    assert page.stack.currentIndex() == 0, "the empty page says what hosts are for"
    child(dialog, QPushButton, "hostAddButton").click()
    assert page.current_key() == NEW
    editor = page.editor
    save = child(dialog, QPushButton, "hostSave")

    # Bad input: said beside its field, Save off, nothing written.
    type_into(child(dialog, QLineEdit, "host_name"), "-oProxyCommand=touch")
    assert "starts with '-'" in _error(dialog, "name")
    assert not save.isEnabled()
    type_into(child(dialog, QLineEdit, "host_name"), "me@devbox")
    assert _error(dialog, "name") == ""
    type_into(child(dialog, QLineEdit, "host_disconnect_seconds"), "0.1")
    assert "from 0.5 to 3600" in _error(dialog, "disconnect_seconds")
    type_into(child(dialog, QLineEdit, "host_disconnect_seconds"), "5")
    type_into(child(dialog, QLineEdit, "host_ssh_config"), str(tmp_path / "nowhere"))
    assert "no such file on this computer" in _error(dialog, "ssh_config")
    assert settings.read_text() == '# mine\n[appearance]\ntheme = "light"\n'
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n")
    type_into(child(dialog, QLineEdit, "host_ssh_config"), str(config))
    editor.env.set_env({"PATH": "/opt/node/bin:/usr/bin:/bin", "API_TOKEN": "s3cret-value"})
    editor.programs.set_env({"claude": "/home/me/.local/bin/claude"})
    editor.env.changed.emit()
    assert editor.env.displayed_value(1) != "s3cret-value", "a secret is masked"
    assert "s3cret" not in editor.env.displayed_value(1)
    assert save.isEnabled()
    save.click()
    qtbot.waitUntil(lambda: page.current_key() == "me@devbox")
    data = tomllib.loads(settings.read_text())
    assert data["hosts"]["me@devbox"] == {
        "ssh_config": str(config), "disconnect_seconds": 5,
        "env": {"PATH": "/opt/node/bin:/usr/bin:/bin", "API_TOKEN": "s3cret-value"},
        "programs": {"claude": "/home/me/.local/bin/claude"}}
    assert settings.read_text().startswith('# mine\n[appearance]\ntheme = "light"\n')
    assert [
        dialog.agents.editor.test_host.itemData(i)
        for i in range(dialog.agents.editor.test_host.count())] == ["", "me@devbox"]

    # A command target, then a hand edit of the file before the next save: kept.
    child(dialog, QPushButton, "hostAddButton").click()
    kind = child(dialog, QComboBox, "hostKind")
    kind.setCurrentIndex(1)
    type_into(child(dialog, QLineEdit, "host_name"), "box")
    assert "give the command" in _error(dialog, "command")
    type_into(child(dialog, QLineEdit, "host_command"), "docker exec -i 'box")
    assert "cannot be split" in _error(dialog, "command")
    type_into(child(dialog, QLineEdit, "host_command"), "docker exec -i box")
    with settings.open("a") as fh:
        fh.write('\n[hosts."by-hand"]\npython = "python3.12"  # typed in an editor\n')
    save.click()
    qtbot.waitUntil(lambda: page.current_key() == "box")
    text = settings.read_text()
    assert 'python = "python3.12"  # typed in an editor' in text
    assert tomllib.loads(text)["hosts"]["box"] == {"command": "docker exec -i box"}
    assert [page.list.item(i).data(256) for i in range(page.list.count())] == [
        "me@devbox", "by-hand", "box"]

    # Renamed through the form: a name already set up is refused beside the field.
    page.list.setCurrentRow(0)
    type_into(child(dialog, QLineEdit, "host_name"), "by-hand")
    save.click()
    qtbot.waitUntil(lambda: "already set up" in _error(dialog, "name"))
    assert "me@devbox" in tomllib.loads(settings.read_text())["hosts"]

    # Remove asks first; the hand-written host stays.
    page.list.setCurrentRow(2)
    child(dialog, QPushButton, "hostRemoveButton").click()
    assert page.remove_confirm.isVisible()
    child(dialog, QPushButton, "hostRemoveConfirmAccept").click()
    qtbot.waitUntil(lambda: "box" not in tomllib.loads(settings.read_text())["hosts"])
    assert set(tomllib.loads(settings.read_text())["hosts"]) == {"me@devbox", "by-hand"}
    close_preferences(drv, dialog, qtbot)


def test_a_broken_settings_file_is_never_written_over(start_app: Start, home: Path,
                                                      qtbot: QtBot) -> None:
    settings = home / "settings.toml"
    drv = start_app()
    dialog = _hosts_page(drv)
    broken = '[hosts."devbox"]\npython = "python3"\n[oops\n'
    settings.write_text(broken)
    child(dialog, QPushButton, "hostAddButton").click()
    type_into(child(dialog, QLineEdit, "host_name"), "devbox2")
    child(dialog, QPushButton, "hostSave").click()
    error = child(dialog, QLabel, "hostSaveError")
    qtbot.waitUntil(lambda: error.text().startswith("Not saved:"))
    assert "line 3" in error.text()
    assert settings.read_text() == broken
    close_preferences(drv, dialog, qtbot)


def test_preferences_test_runs_the_agent_on_a_chosen_host(
        start_app: Start, home: Path, qtbot: QtBot, tmp_path: Path) -> None:
    """The host ``box`` is a command target (``env``): the Test's turn goes through the remote
    launch and the supervisor, its program the host's own (a wrapper that leaves a mark)."""
    mark = tmp_path / "ran-on-box"
    wrapper = tmp_path / "box-python"
    wrapper.write_text(f'#!/bin/sh\necho "$PWD" > "{mark}"\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    (home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\nenv = {{ HOME = "{tmp_path}" }}\n'
        f'programs = {{ talker = "{wrapper}" }}\n\n[hosts."gone"]\ncommand = "false"\n')
    drv = start_app()
    add_custom_agent(drv, qtbot, "talker", [sys.executable, str(FAKE_AGENT), "normal",
                                            "{prompt}"])
    dialog = open_preferences(drv)
    select_agent(dialog, "talker")
    where = child(dialog, QComboBox, "agentTestHost")
    assert where.isVisibleTo(dialog)
    assert [where.itemText(i) for i in range(where.count())] == [
        "On this computer", "On box", "On gone"]
    button = child(dialog, QPushButton, "agentTestButton")
    result = child(dialog, QLabel, "agentTestResult")
    where.setCurrentIndex(1)
    button.click()
    qtbot.waitUntil(button.isEnabled, timeout=60_000)
    assert result.text().startswith("✓ Works"), result.text()
    assert "Its reply: “Hello from fake" in result.text(), result.text()
    # The host's own program ran, started by the supervisor where the command target starts
    # (here: the link's folder; over ssh, the home there).
    assert "tolaria-remote-" in mark.read_text(), mark.read_text()
    dialog.resize(900, 700)
    try:
        for suffix, name in (("", "light"), ("-dark", "dark")):
            theme.apply_theme(name)
            qtbot.wait(50)
            # The Test row alone: the form above it shows this machine's paths.
            editor = dialog.agents.editor
            row = editor.test_host.geometry().united(editor.test_result.geometry())
            folder = ROOT / "docs" if os.environ.get("TOLARIA_DOCS_SHOTS") == "1" else tmp_path
            shot = editor.grab(row.adjusted(-8, -8, 8, 8))
            assert shot.save(str(folder / f"settings-test-on-host{suffix}.png"))
    finally:
        theme.apply_theme("light")

    where.setCurrentIndex(2)
    started = time.monotonic()
    button.click()
    qtbot.waitUntil(button.isEnabled, timeout=20_000)
    assert time.monotonic() - started < 10
    assert result.text() == "✗ cannot look for agents on gone: exit code 1"
    close_preferences(drv, dialog, qtbot)


def test_pictures_of_the_hosts_page(start_app: Start, home: Path, qtbot: QtBot,
                                    tmp_path: Path) -> None:
    (home / "settings.toml").write_text(
        '[hosts."devbox"]\npython = "/usr/bin/python3.12"\n'
        'env = { PATH = "/opt/node/bin:/usr/bin:/bin", ANTHROPIC_API_KEY = "sk-ant-123456789" }\n'
        'programs = { claude = "/home/me/.local/bin/claude" }\n\n'
        '[hosts."box"]\ncommand = "docker exec -i box"\n')
    drv = start_app()
    dialog = _hosts_page(drv)
    dialog.resize(900, 700)
    type_into(child(dialog, QLineEdit, "host_disconnect_seconds"), "0")
    assert "from 0.5 to 3600" in _error(dialog, "disconnect_seconds")
    try:
        for suffix, name in (("", "light"), ("-dark", "dark")):
            theme.apply_theme(name)
            qtbot.wait(50)
            shot = save_shot(dialog, tmp_path, f"settings-hosts{suffix}.png")
            assert shot.is_file()
    finally:
        theme.apply_theme("light")
    close_preferences(drv, dialog, qtbot)
