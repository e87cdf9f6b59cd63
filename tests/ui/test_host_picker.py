"""The agent picker of a chat on a host (issue 25 item 5): the agents found there, under the
host's heading, with versions; those not there greyed with the reason; this computer's model
endpoints under their own heading; "Look again" asks the host afresh. The host is a configured
command target (``env``: the look runs right here, through the same probe as over ssh), its
PATH a folder of fake agents. Pictures light and dark (``TOLARIA_DOCS_SHOTS=1``:
docs/host-agents-picker[-dark].png)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from PySide6.QtGui import QStandardItemModel
from pytestqt.qtbot import QtBot
from ui.test_chat_host import pick
from ui.test_new_chat_host import pick as pick_new_chat_host
from ui.uihelpers import AppDriver, save_shot

from tolaria.core.adapters.manifest import Manifest
from tolaria.ui import theme
from tolaria.ui.chat.agent_status import NEEDS_SETUP, NOT_INSTALLED, READY
from tolaria.ui.chat.header import GROUP_ROLE, HEADER_ROLE, REFRESH_ROLE

StartApp = Callable[..., AppDriver]


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def box(home: Path, tmp_path: Path) -> Path:
    """The host ``box``: ``claude`` 2.1.7 and a ``qwen`` that fails its version check on its
    PATH (the host's env), nothing else."""
    bin_dir = tmp_path / "box-bin"
    bin_dir.mkdir()
    _script(bin_dir / "claude", 'echo "2.1.7 (Claude Code)"')
    _script(bin_dir / "qwen", 'echo "needs a first-run setup" >&2; exit 2')
    (home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n'
        f'env = {{ PATH = "{bin_dir}:/usr/bin:/bin", HOME = "{tmp_path}", SHELL = "/bin/sh" }}\n')
    return bin_dir


def _agents(drv: AppDriver) -> None:
    manifests = drv.app.adapters.manifests
    keep = {k: manifests[k] for k in ("claude", "qwen", "aider", "demo")}
    keep["ollama"] = Manifest(id="ollama", name="Ollama (local model)", protocol="openai-chat",
                              command=(), base_url="http://127.0.0.1:9/v1", model="m")
    manifests.clear()
    manifests.update(keep)
    drv.app.preferences.show_manifests()


def _rows(drv: AppDriver) -> list[tuple[str, object, object, bool]]:
    picker = drv.window.header.agent_picker
    model = picker.model()
    assert isinstance(model, QStandardItemModel)
    return [(picker.itemText(r), picker.itemData(r), picker.itemData(r, GROUP_ROLE),
             model.item(r).isEnabled()) for r in range(picker.count())]


def test_a_chat_on_a_host_picks_from_the_agents_found_there(
        start_app: StartApp, box: Path, qtbot: QtBot, tmp_path: Path) -> None:
    drv = start_app()
    _agents(drv)
    header = drv.window.header
    picker = header.agent_picker
    pick(header, "box")
    qtbot.waitUntil(lambda: picker.headers() == ["On box", "This computer"], timeout=20_000)
    rows = _rows(drv)
    assert rows[0] == ("On box", None, None, False)
    assert rows[1] == ("Claude Code 2.1.7", "claude", READY, True)
    names = {data: (text, group, enabled) for text, data, group, enabled in rows}
    qwen = names["qwen"]
    assert qwen[1:] == (NEEDS_SETUP, True), "installed there: choosable"
    assert "installed on box, but `qwen --version` exited with code 2" in qwen[0]
    aider = names["aider"]
    assert aider[1:] == (NOT_INSTALLED, False)
    assert "not on box: no aider on PATH or through the login shell there" in aider[0]
    # {python} is the host's python: this box's is ours, which has Tolaria's demo.
    assert names["demo"][1:] == (READY, True)
    assert picker.headers()[-1] == "This computer"
    assert names["ollama"][1] != NOT_INSTALLED and names["ollama"][2], "an endpoint: from here"
    refresh = [r for r in range(picker.count()) if picker.itemData(r, REFRESH_ROLE)]
    assert [picker.itemText(r) for r in refresh] == ["↻ Look again on box"]
    for row in range(picker.count()):
        assert bool(picker.itemData(row, HEADER_ROLE)) == (
            picker.itemData(row) is None and not picker.itemData(row, REFRESH_ROLE))

    _shots(drv, qtbot, tmp_path)

    # Installed there since: "Look again" asks afresh; the chat's agent stays chosen.
    _script(box / "aider", 'echo "aider 0.86.1"')
    chosen = picker.current_agent()
    picker.activated.emit(refresh[0])
    assert picker.headers()[0] == "On box · looking for agents…"
    assert picker.current_agent() == chosen
    qtbot.waitUntil(lambda: picker.headers()[0] == "On box", timeout=20_000)
    assert picker.itemText(picker.findData("aider")) == "Aider 0.86.1"

    pick(header, "Local (this computer)")  # back here: the local groups again
    qtbot.waitUntil(lambda: "On box" not in picker.headers())
    assert "This computer" not in picker.headers()


def test_a_host_that_cannot_be_reached_says_why_and_keeps_its_agents_choosable(
        start_app: StartApp, home: Path, qtbot: QtBot) -> None:
    (home / "settings.toml").write_text('[hosts."gone"]\ncommand = "false"\n')
    drv = start_app()
    _agents(drv)
    header = drv.window.header
    picker = header.agent_picker
    pick(header, "gone")
    qtbot.waitUntil(lambda: picker.headers()[:1] == ["On gone · not reached"], timeout=20_000)
    rows = _rows(drv)
    assert rows[1][0] == "cannot look for agents on gone: exit code 1"
    assert rows[1][3] is False
    assert picker.is_available("claude"), "the host may come back: the turn will say"


def _shots(drv: AppDriver, qtbot: QtBot, tmp_path: Path) -> None:
    picker = drv.window.header.agent_picker
    try:
        for suffix, name in (("", "light"), ("-dark", "dark")):
            theme.apply_theme(name)
            qtbot.wait(50)  # the palette change reaches the popup as an event
            picker.showPopup()
            popup = picker.view().window()
            qtbot.waitUntil(popup.isVisible)
            qtbot.wait(50)
            assert save_shot(popup, tmp_path, f"host-agents-picker{suffix}.png").is_file()
            picker.hidePopup()
    finally:
        theme.apply_theme("light")


def test_a_host_that_hangs_never_hangs_the_window(start_app: StartApp, home: Path,
                                                  qtbot: QtBot, tmp_path: Path) -> None:
    """The look runs off the GUI thread: while the host says nothing the window works (another
    chat is opened and its picker is the local one), and quitting ends the look's process."""
    hang = tmp_path / "hang"
    _script(hang, "exec sleep 300")
    (home / "settings.toml").write_text(f'[hosts."stuck"]\ncommand = "{hang}"\n')
    drv = start_app()
    header = drv.window.header
    picker = header.agent_picker
    first = drv.pane.conversation_id
    pick(header, "stuck")
    qtbot.waitUntil(lambda: picker.headers()[:1] == ["On stuck · looking for agents…"])
    qtbot.waitUntil(lambda: bool(_sleepers()))
    pick_new_chat_host(drv.window.sidebar.new_host_button, "This computer")  # a local chat
    qtbot.waitUntil(lambda: drv.pane.conversation_id != first)
    assert "On stuck · looking for agents…" not in picker.headers()
    drv.close()
    assert not _sleepers(), "the look ended with the app"


def _sleepers() -> list[psutil.Process]:
    found = []
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if proc.cmdline()[:2] == ["sleep", "300"] and proc.status() != "zombie":
                found.append(proc)
    return found
