"""The window's runs get the MCP servers of settings.toml (ADR 0019): a server the agent
cannot get is said in the turn, the others reach it, and an MCP tool's card names its server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PySide6.QtWidgets import QLabel
from ui.uihelpers import StartApp, save_shot

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.adapters.mcp_spec import McpSpec
from tolaria.ui.transcript.cards.tool import ToolCard

FAKES = Path(__file__).resolve().parents[1] / "fakes"


def test_the_window_passes_the_servers_and_says_which_it_left_out(
        start_app: StartApp, home: Path, tmp_path: Path) -> None:
    (home / "settings.toml").write_text(
        "[mcp.servers.ghost]\ncommand = \"tolaria-no-such-mcp-server\"\n"
        f"[mcp.servers.daemon]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(FAKES / 'mcp_probe_server.py'))}]\n")
    drv = start_app()
    drv.use_agent(Manifest(id="fake-mcp", name="Fake MCP client", protocol="claude-stream-json",
                           command=(sys.executable, str(FAKES / "fake_mcp_client.py"),
                                    "{prompt}"),
                           env={"FAKE_MCP_FINISH": "1"},
                           mcp=McpSpec(form="claude-json", transports=("stdio",))))
    drv.send("go")
    turn = drv.wait_finished()
    assert turn.status == "completed"
    notes = [n.text() for n in turn.findChildren(QLabel, "turnNotice")]
    assert any(n.startswith("MCP server 'ghost' is not passed to Fake MCP client")
               for n in notes), notes
    assert "servers: daemon" in turn.text()  # what the agent found in its --mcp-config
    cards = turn.findChildren(ToolCard)
    assert [c._fold.toggle.text() for c in cards] == ["▸ daemon · work"]
    save_shot(drv.window, tmp_path, "mcp-turn.png")
