"""Preferences → MCP servers (issue 28): add, edit and remove a server as a user does, the file
on disk says exactly that and keeps a hand-written comment; Test lists the fake server's tools
with their descriptions, Cancel mid-Test leaves no process, each bad input shows its own
message; a broken settings file is never written over."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from mcphelpers import FAKE_MCP, TOOLS, live_fake_servers, refused_url, served
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QListWidget, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, close_preferences, open_preferences, type_into
from ui.uihelpers import AppDriver

from tolaria.config.mcp import REFUSE, load_mcp
from tolaria.config.settings import settings_path
from tolaria.core.mcp.servers import McpServer
from tolaria.ui.settings import SettingsDialog
from tolaria.ui.settings.env_table import EnvTable
from tolaria.ui.settings.mcp_page import McpPage

Start = Callable[..., AppDriver]

HAND_WRITTEN = """\
# written by hand: keep me
[behaviour]
grace_seconds = 2.0
"""


def _mcp_page(drv: AppDriver) -> tuple[SettingsDialog, McpPage]:
    dialog = open_preferences(drv)
    dialog.tabs.setCurrentWidget(dialog.mcp)
    assert not dialog.save_button.isVisible()  # the page saves each server itself
    return dialog, dialog.mcp


def _add(drv: AppDriver, page: McpPage, name: str, args: str, command: str = sys.executable
         ) -> None:
    child(page, QPushButton, "mcpAddButton").click()
    type_into(child(page, QLineEdit, "mcpName"), name)
    type_into(child(page, QLineEdit, "mcpCommand"), command)
    type_into(child(page, QLineEdit, "mcpArgs"), args)


def _fill_row(table: EnvTable, name: str, value: str) -> None:
    """Add a row and type its name and value, as a user does."""
    table.add_button.click()
    row = table.table.rowCount() - 1
    for column, text in ((0, name), (1, value)):
        item = table.table.item(row, column)
        assert item is not None
        item.setText(text)


def _save(qtbot: QtBot, page: McpPage) -> None:
    save = child(page, QPushButton, "mcpSave")
    assert save.isEnabled(), [e.text() for e in page.editor.errors.values() if e.text()]
    save.click()
    qtbot.waitUntil(lambda: page.editor.dirty.text() == "", timeout=5000)


def _test(qtbot: QtBot, page: McpPage, timeout_ms: int = 30_000) -> str:
    button = child(page, QPushButton, "mcpTestButton")
    status = child(page, QLabel, "mcpTestStatus")
    button.click()
    assert status.text().startswith("Testing… 0 s"), status.text()
    assert child(page, QPushButton, "mcpTestCancel").isVisibleTo(page)
    qtbot.waitUntil(lambda: button.text() == "Test", timeout=timeout_ms)
    return status.text()


def test_add_edit_remove_write_the_file_and_keep_its_comment(start_app: Start,
                                                              qtbot: QtBot) -> None:
    settings_path().write_text(HAND_WRITTEN)
    drv = start_app()
    dialog, page = _mcp_page(drv)
    assert child(page, QLabel, "mcpEmpty").isVisibleTo(page)
    _add(drv, page, "tools", f"{FAKE_MCP} ok")
    servers = child(page, QListWidget, "mcpServerList")
    assert servers.count() == 1 and "New server" not in servers.item(0).text()
    _save(qtbot, page)
    expected = McpServer("tools", command=sys.executable, args=(str(FAKE_MCP), "ok"))
    assert load_mcp().servers == (expected,)
    assert "Saved the MCP server tools" in dialog.status.text()

    # Edit: an env variable (a secret one is masked), only these agents, disabled.
    _fill_row(page.editor.env, "API_TOKEN", "sk-not-shown-1234567")
    assert page.editor.env.displayed_value(0) == "••••••••"
    child(page, type(page.editor.some_agents), "mcpAgentsSome").click()
    agents = child(page, QListWidget, "mcpAgentList")
    assert child(page, QPushButton, "mcpSave").isEnabled() is False  # no agent ticked yet
    assert "tick at least one agent" in page.editor.errors["agents"].text()
    demo = next(agents.item(i) for i in range(agents.count())
                if agents.item(i).text().startswith("Demo"))
    demo.setCheckState(Qt.CheckState.Checked)
    page.editor.enabled.click()
    assert "•" in servers.item(0).text().splitlines()[0]  # unsaved
    _save(qtbot, page)
    [saved] = load_mcp().servers
    assert saved.env == (("API_TOKEN", "sk-not-shown-1234567"),)
    assert saved.agents == ("demo",) and not saved.enabled
    text = settings_path().read_text()
    assert text.startswith("# written by hand: keep me")
    assert "grace_seconds = 2.0" in text

    # on_failure is written at once.
    combo = child(page, QComboBox, "mcpOnFailure")
    combo.setCurrentIndex(combo.findData(REFUSE))
    assert load_mcp().on_failure == REFUSE

    # Remove asks inline first; Cancel keeps it, Remove removes it.
    child(page, QPushButton, "mcpRemoveButton").click()
    child(page, QPushButton, "mcpRemoveConfirmReject").click()
    assert len(load_mcp().servers) == 1
    child(page, QPushButton, "mcpRemoveButton").click()
    child(page, QPushButton, "mcpRemoveConfirmAccept").click()
    qtbot.waitUntil(lambda: servers.count() == 0, timeout=5000)
    assert load_mcp().servers == ()
    assert settings_path().read_text().startswith("# written by hand: keep me")
    close_preferences(drv, dialog, qtbot)


def test_a_bad_field_is_named_and_a_taken_name_refused(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    dialog, page = _mcp_page(drv)
    _add(drv, page, "one", f"{FAKE_MCP}")
    _save(qtbot, page)
    _add(drv, page, "bad name!", "'unclosed")
    errors = page.editor.errors
    assert "letters, digits" in errors["name"].text()
    assert "close the quote" in errors["args"].text()
    assert not child(page, QPushButton, "mcpSave").isEnabled()
    assert not child(page, QPushButton, "mcpTestButton").isEnabled()
    type_into(child(page, QLineEdit, "mcpName"), "one")
    type_into(child(page, QLineEdit, "mcpArgs"), "x")
    child(page, QPushButton, "mcpSave").click()
    qtbot.waitUntil(lambda: "already exists" in page.editor.general_error.text(), timeout=5000)
    assert [s.name for s in load_mcp().servers] == ["one"]
    close_preferences(drv, dialog, qtbot)


def test_test_lists_the_tools_with_their_descriptions(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    dialog, page = _mcp_page(drv)
    _add(drv, page, "tools", f"{FAKE_MCP} ok")  # tested before it is saved
    text = _test(qtbot, page)
    assert text.startswith("✓ Works"), text
    assert "fake-tools: 2 tools" in text
    shown = child(page, QLabel, "mcpTools").text()
    for name, description in TOOLS:
        assert f"<b>{name}</b> — {description}" in shown
    assert "✓ 2 tools" in child(page, QListWidget, "mcpServerList").item(0).text()
    assert live_fake_servers() == []
    close_preferences(drv, dialog, qtbot)


def test_cancel_mid_test_leaves_no_process(start_app: Start, qtbot: QtBot, tmp_path: Path
                                           ) -> None:
    drv = start_app()
    dialog, page = _mcp_page(drv)
    _add(drv, page, "hanger", f"{FAKE_MCP} hang")
    button = child(page, QPushButton, "mcpTestButton")
    status = child(page, QLabel, "mcpTestStatus")
    button.click()
    qtbot.waitUntil(lambda: bool(live_fake_servers()), timeout=10_000)
    qtbot.waitUntil(lambda: status.text().startswith("Testing… 1 s"), timeout=10_000)
    assert "gives up at 20 s" in status.text()
    child(page, QPushButton, "mcpTestCancel").click()
    qtbot.waitUntil(lambda: button.text() == "Test", timeout=15_000)
    assert status.text() == "Test cancelled; nothing of it is left running."
    assert live_fake_servers() == []
    # Closing the window mid-Test cancels it too.
    button.click()
    qtbot.waitUntil(lambda: bool(live_fake_servers()), timeout=10_000)
    close_preferences(drv, dialog, qtbot)
    qtbot.waitUntil(lambda: not drv.app.preferences.mcp.testing("+new"), timeout=15_000)
    assert live_fake_servers() == []


def test_each_bad_input_shows_its_message(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    control = drv.app.preferences.mcp
    control.timeout = 3.0
    dialog, page = _mcp_page(drv)
    assert page.test_timeout == 3.0
    cases = [
        ("nowhere", "mcp-server-nowhere-zz", "", "✗ Command not found: mcp-server-nowhere-zz "
                                                "is not on the PATH"),
        ("exits", sys.executable, f"{FAKE_MCP} exit",
         "✗ The server exited with code 3 before it answered initialize: fatal: cannot read "
         "~/.fake-tools.json"),
        ("garbage", sys.executable, f"{FAKE_MCP} garbage",
         "✗ The server printed something that is not MCP on stdout: “Fake tools v1.0 ready!”"),
        ("hangs", sys.executable, f"{FAKE_MCP} hang",
         "✗ No answer to initialize within 3 s; the server was stopped"),
    ]
    for name, command, args, message in cases:
        control.timeout = 3.0 if name == "hangs" else 30.0  # only the hang waits it out
        _add(drv, page, name, args, command=command)
        _save(qtbot, page)
        text = _test(qtbot, page)
        assert text.startswith(message), (name, text)
        assert "✗" in child(page, QListWidget, "mcpServerList").currentItem().text()
    control.timeout = 30.0
    # A ${VAR} not set.
    _fill_row(page.editor.env, "TOKEN", "${SURELY_NOT_SET_MCP}")
    assert _test(qtbot, page).startswith(
        "✗ Env TOKEN: ${SURELY_NOT_SET_MCP} is not set in Tolaria's environment")
    # Remote: a URL that refuses, and one that wants credentials.
    child(page, QPushButton, "mcpAddButton").click()
    type_into(child(page, QLineEdit, "mcpName"), "remote")
    kind = child(page, QComboBox, "mcpTransport")
    kind.setCurrentIndex(kind.findData("http"))
    assert not page.editor.command.isVisibleTo(page)
    type_into(child(page, QLineEdit, "mcpUrl"), refused_url())
    assert "connection refused" in _test(qtbot, page)
    with served("http", token="the-right-token-1234") as url:
        type_into(child(page, QLineEdit, "mcpUrl"), url)
        assert "answered HTTP 401 Unauthorized" in _test(qtbot, page)
        _fill_row(page.editor.headers, "Authorization", "Bearer the-right-token-1234")
        assert page.editor.headers.displayed_value(0) == "••••••••"
        assert _test(qtbot, page).startswith("✓ Works")
    assert live_fake_servers() == []
    close_preferences(drv, dialog, qtbot)


def test_a_broken_settings_file_is_not_written_over(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    broken = HAND_WRITTEN + "[mcp.servers.x\n"
    settings_path().write_text(broken)
    dialog, page = _mcp_page(drv)
    _add(drv, page, "tools", f"{FAKE_MCP}")
    child(page, QPushButton, "mcpSave").click()
    error = page.editor.general_error
    qtbot.waitUntil(lambda: error.text().startswith("Not saved:"), timeout=5000)
    assert "line 4" in error.text() and "not valid TOML" in error.text()
    assert settings_path().read_text() == broken
    assert "•" in child(page, QListWidget, "mcpServerList").item(0).text()  # still unsaved
    close_preferences(drv, dialog, qtbot)


def test_quitting_mid_test_ends_the_server_before_the_app_is_done(start_app: Start,
                                                                  qtbot: QtBot) -> None:
    drv = start_app()
    _dialog, page = _mcp_page(drv)
    _add(drv, page, "hanger", f"{FAKE_MCP} hang")
    child(page, QPushButton, "mcpTestButton").click()
    qtbot.waitUntil(lambda: bool(live_fake_servers()), timeout=10_000)
    [run] = drv.app.registry.live()  # listed like a run (``tolaria streams``)
    assert run["agent"] == "mcp:hanger"
    drv.close()  # the app's real shutdown: it waits for the Test's tree to be gone
    assert live_fake_servers() == []
    assert drv.app.registry.live() == []


def test_a_hand_edit_made_while_the_page_is_open_is_kept(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    dialog, page = _mcp_page(drv)
    _add(drv, page, "mine", f"{FAKE_MCP}")
    _save(qtbot, page)
    # Meanwhile, in an editor: another server, a comment, and a key of this one.
    path = settings_path()
    path.write_text(path.read_text().replace("[mcp.servers.mine]", "# by hand\n[mcp.servers.mine]")
                    .replace("args = [", 'env = {BY_HAND = "1"}\nargs = [')
                    + '\n[mcp.servers.theirs]\ncommand = "their-server"  # theirs\n')
    type_into(child(page, QLineEdit, "mcpArgs"), f"{FAKE_MCP} ok")
    _save(qtbot, page)
    text = path.read_text()
    assert "# by hand" in text and 'command = "their-server"  # theirs' in text
    assert load_mcp().servers[0].env == (("BY_HAND", "1"),)  # a key the window did not touch
    assert load_mcp().servers[0].args == (str(FAKE_MCP), "ok")
    assert [s.name for s in load_mcp().servers] == ["mine", "theirs"]
    servers = child(page, QListWidget, "mcpServerList")
    assert servers.count() == 2  # the page shows the file as it is now
    servers.setCurrentRow(0)
    child(page, QPushButton, "mcpRemoveButton").click()
    child(page, QPushButton, "mcpRemoveConfirmAccept").click()
    qtbot.waitUntil(lambda: servers.count() == 1, timeout=5000)
    assert [s.name for s in load_mcp().servers] == ["theirs"]
    assert 'command = "their-server"  # theirs' in path.read_text()
    close_preferences(drv, dialog, qtbot)


def test_the_per_agent_plan_shows_under_the_agents_when_one_is_plugged_in(
        start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    dialog, page = _mcp_page(drv)
    note = child(page, QLabel, "mcpAgentNote")
    page.plan = None  # the app plugs the run-time plan in (the next test); without it:
    _add(drv, page, "tools", f"{FAKE_MCP}")
    assert note.text().startswith("Each agent gets it in its own form")
    page.plan = lambda server: [("Claude Code", "passed"),
                                ("Aider", f"not passed: {server.name} is stdio, it takes none")]
    type_into(child(page, QLineEdit, "mcpArgs"), f"{FAKE_MCP} ok")
    assert note.text() == "Claude Code: passed\nAider: not passed: tools is stdio, it takes none"
    close_preferences(drv, dialog, qtbot)


def test_each_agent_says_whether_it_gets_the_server_by_the_run_time_rule(
        start_app: Start, qtbot: QtBot) -> None:
    """The lines under the agent selection come from the plan a run applies: an agent with an
    MCP form gets the server, one without says why not, and a ${VAR} that is not set is named
    for every agent before any run would leave the server out."""
    drv = start_app()
    dialog, page = _mcp_page(drv)
    note = child(page, QLabel, "mcpAgentNote")
    _add(drv, page, "tools", f"{FAKE_MCP}")
    qtbot.waitUntil(lambda: note.text().startswith("Gets it: "), timeout=5000)
    lines = note.text().splitlines()
    gets = lines[0].removeprefix("Gets it: ").split(", ")
    assert {"Claude Code", "Codex", "Gemini CLI"} <= set(gets), lines
    no_form = next(line for line in lines if line.endswith("their own MCP settings apply)"))
    assert "Aider" in no_form and "Claude Code" not in no_form
    assert len(lines) <= 3, "agents left out for one reason share a line"
    _fill_row(page.editor.env, "TOKEN", "${TOLARIA_TEST_UNSET_VARIABLE}")
    qtbot.waitUntil(lambda: "TOLARIA_TEST_UNSET_VARIABLE" in note.text(), timeout=5000)
    unset = next(line for line in note.text().splitlines()
                 if "TOLARIA_TEST_UNSET_VARIABLE" in line)
    assert unset.startswith("Not passed to ") and "Claude Code" in unset, note.text()
    assert not note.text().startswith("Gets it")
    close_preferences(drv, dialog, qtbot)
