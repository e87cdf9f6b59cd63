"""Take the pictures of the window around the transcript (issue 17), offscreen:

    QT_QPA_PLATFORM=offscreen python bench/window_shots.py [--out-dir docs]

docs/palette.png   the command palette over the window (Ctrl+K), filtered by a few letters
docs/picker.png    the agent picker grouped Ready / Needs setup / Not installed
docs/sidebar.png   chat search, a fan-out job grouped in the sidebar, the inline delete confirm
docs/fanout.png    a fan-out job's window, equal columns
docs/prefs-test.png  Preferences → Agents after a Test: the agent's reply shown
docs/prefs-testing.png  a Test under way: the seconds it has taken, and Cancel
docs/shortcuts.png   Preferences → Shortcuts: the configurable ones, then every other one
docs/mcp.png         Preferences → MCP servers after a Test: the server's tools and descriptions
docs/mcp-dark.png    the same page in the dark theme, a remote server selected

Popups are separate top-level windows that ``QWidget.grab()`` of the main window does not
include, so they are painted onto the window's picture at their place.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from screenshot import (  # noqa: E402  (bench/screenshot.py, next to it)
    agent_folder,
    save,
    shots_main,
    until,
)


def with_popup(window, popup):  # type: ignore[no-untyped-def]
    """The window's picture with a popup window painted where it is on the screen."""
    from PySide6.QtGui import QPainter

    picture = window.grab()
    painter = QPainter(picture)
    top_left = window.mapFromGlobal(popup.mapToGlobal(popup.rect().topLeft()))
    painter.drawPixmap(top_left, popup.grab())
    painter.end()
    return picture


async def shoot(out_dir: Path) -> None:
    from PySide6.QtTest import QTest

    from tolaria.app.main import Tolaria
    from tolaria.core.adapters.manifest import Manifest

    app = Tolaria(cwd=str(agent_folder()))
    await app.start()
    window = app.window
    try:
        window.resize(1180, 760)
        # A few chats and one fan-out job, so the sidebar has something to show.
        pane = window.current_pane()
        assert pane is not None
        os.environ["TOLARIA_DEMO_TOOL_SECONDS"] = "0.1"
        pane.composer.setPlainText("Why does Stop kill the whole process tree?")
        pane.button.click()
        await until(lambda: pane.running_stream is None)
        app.controller.rename(pane.conversation_id, "Why Stop kills the tree")
        for title in ("Release notes draft", "Refactor the sidebar"):
            window.new_action.trigger()
            await until(lambda: len(window.sidebar.ids()) >= 2)
            await asyncio.sleep(0.2)
            current = window.current_conversation_id()
            assert current is not None
            app.controller.rename(current, title)
        app.fanout.start_job("Summarise the failing tests", ["demo", "demo-2"], str(agent_folder()),
                             {"demo": "Demo agent", "demo-2": "Demo agent (copy)"})
        await until(lambda: bool(window.fan_out_views))
        view = next(iter(window.fan_out_views.values()))
        await until(lambda: all(p.running_stream is None for p in view.panes()), timeout=60)
        await until(lambda: all(not p.transcript.busy for p in view.panes()))
        await asyncio.sleep(0.3)

        view.resize(1180, 640)
        await asyncio.sleep(0.2)
        save(view.grab(), out_dir / "fanout.png")
        view.close()

        window.activateWindow()
        window.open_conversation(window.sidebar.ids()[-1])
        await asyncio.sleep(0.3)

        # The palette.
        window.palette_action.trigger()
        await until(window.command_palette.isVisible)
        QTest.keyClicks(window.command_palette.field, "re")
        await asyncio.sleep(0.2)
        save(with_popup(window, window.command_palette), out_dir / "palette.png")
        window.command_palette.hide()

        # The picker, grouped: a missing CLI and a local server that is down join the list.
        missing = Manifest(id="ghost", name="Ghost CLI", protocol="claude-stream-json",
                           command=("tolaria-no-such-program-xyz", "{prompt}"),
                           install_hint="npm install -g ghost-cli")
        app.adapters.manifests["ghost"] = missing
        window.set_manifests(list(app.adapters.manifests.values()))
        await app.preferences.detect_agents()
        picker = window.header.agent_picker
        picker.showPopup()
        await asyncio.sleep(0.3)
        popup = picker.view().window()
        save(with_popup(window, popup), out_dir / "picker.png")
        picker.hidePopup()

        # The sidebar: a search, the job's group, and the inline delete confirm.
        window.sidebar.search.setText("e")
        window.sidebar.list.setFocus()
        await asyncio.sleep(0.1)
        window.sidebar.delete_action.trigger()
        await asyncio.sleep(0.2)
        sidebar = window.sidebar
        save(sidebar.grab(), out_dir / "sidebar.png")
        sidebar.confirm.reject_button.click()
        sidebar.search.clear()

        # Preferences → Test with the reply.
        window.preferences_action.trigger()
        from PySide6.QtWidgets import QPushButton

        from tolaria.ui.settings import SettingsDialog

        dialog = window.findChild(SettingsDialog, "settingsDialog")
        assert dialog is not None
        dialog.resize(900, 660)
        dialog.agents.select("demo")
        await asyncio.sleep(1.0)
        test = dialog.findChild(QPushButton, "agentTestButton")
        assert test is not None
        test.click()
        await asyncio.sleep(0.2)
        await until(lambda: test.text() == "Test", timeout=60)
        save(dialog.grab(), out_dir / "prefs-test.png")
        # A Test that hangs: the seconds count, Cancel is offered.
        dialog.agents.select("slow-agent")
        await asyncio.sleep(0.5)
        test.click()
        await asyncio.sleep(3.2)
        save(dialog.grab(), out_dir / "prefs-testing.png")
        cancel = dialog.findChild(QPushButton, "agentTestCancel")
        assert cancel is not None
        cancel.click()
        await until(lambda: test.text() == "Test", timeout=30)
        dialog.tabs.setCurrentWidget(dialog.shortcuts)
        await asyncio.sleep(0.2)
        save(dialog.grab(), out_dir / "shortcuts.png")
        await shoot_mcp(dialog, out_dir)
        dialog.close()
    finally:
        window.force_close()
        await app.shutdown()


async def shoot_mcp(dialog, out_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """Preferences → MCP servers: a Test of the fake server (its tools listed), then the
    dark theme with a remote server selected."""
    from PySide6.QtWidgets import QPushButton

    from tolaria.ui import theme

    page = dialog.mcp
    dialog.tabs.setCurrentWidget(page)
    page.list.setCurrentRow(0)
    await asyncio.sleep(0.2)
    test = dialog.findChild(QPushButton, "mcpTestButton")
    assert test is not None
    test.click()
    await asyncio.sleep(0.2)
    await until(lambda: test.text() == "Test", timeout=60)
    save(dialog.grab(), out_dir / "mcp.png")
    theme.apply_theme("dark")
    page.list.setCurrentRow(1)
    await asyncio.sleep(0.3)
    save(dialog.grab(), out_dir / "mcp-dark.png")
    theme.apply_theme("system")


def prepare(home: Path) -> None:
    """A second demo agent so the fan-out job has two columns, and one whose Test hangs."""
    adapters = home / "adapters"
    demo = (ROOT / "adapters" / "demo.toml").read_text()
    fake = ROOT / "tests" / "fakes" / "fake_agent.py"
    adapters.joinpath("slow-agent.toml").write_text(
        'id = "slow-agent"\nname = "Slow agent"\nprotocol = "claude-stream-json"\n'
        f'command = ["{{python}}", "{fake}", "hang", "{{prompt}}"]\n')
    # The fake MCP server behind a plain program name on PATH: the picture shows no path.
    bin_dir = home / "bin"
    bin_dir.mkdir()
    server = ROOT / "tests" / "fakes" / "mcp_server.py"
    program = bin_dir / "notes-mcp"
    program.write_text(f"#!{sys.executable}\nimport runpy\n"
                       f"runpy.run_path({str(server)!r}, run_name='__main__')\n")
    program.chmod(0o755)
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    home.joinpath("settings.toml").write_text(
        '[mcp.servers.notes]\ncommand = "notes-mcp"\nargs = ["--read-only"]\n'
        'env = { FAKE_MCP_TOOL = "search_notes", NOTES_API_KEY = "${NOTES_KEY}" }\n\n'
        '[mcp.servers.docs]\ntransport = "http"\nurl = "https://docs.example.com/mcp"\n'
        'headers = { Authorization = "Bearer ${DOCS_TOKEN}" }\nagents = ["demo"]\n')
    os.environ["NOTES_KEY"] = "notes-demo-key-0000"
    adapters.joinpath("demo-2.toml").write_text(
        demo.replace('id = "demo"', 'id = "demo-2"', 1)
            .replace('name = "', 'name = "Copy of ', 1))


def main() -> int:
    return shots_main(__doc__.splitlines()[0], shoot, prepare)


if __name__ == "__main__":
    sys.exit(main())
