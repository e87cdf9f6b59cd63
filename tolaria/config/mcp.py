"""The MCP servers of ``settings.toml`` (issue 28): ``[mcp]`` and one ``[mcp.servers.<name>]``
table per server (the entry's model: tolaria/core/mcp/servers.py).

```toml
[mcp]
on_failure = "continue"   # a server that cannot start: "continue" (the run goes on without it)
                          # or "refuse" (the run does not start)

[mcp.servers.git]
command = "uvx"
args = ["mcp-server-git"]
env = { GIT_TOKEN = "${GIT_TOKEN}" }
agents = ["claude", "codex"]   # empty or absent: every agent
```

Reading never raises: a broken entry is left out and reported (file:line: what is wrong), like
the rest of the settings; the other servers still load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tolaria.config.settings import settings_path
from tolaria.core.mcp.servers import McpConfigError, McpServer, from_table
from tolaria.support import tomlfile
from tolaria.support.tomlfile import SettingsFileError

CONTINUE, REFUSE = "continue", "refuse"
ON_FAILURE = (CONTINUE, REFUSE)


@dataclass(frozen=True)
class McpSettings:
    servers: tuple[McpServer, ...] = ()
    #: What a run does when one of its servers cannot be started or reached.
    on_failure: str = CONTINUE
    #: What was wrong in the file, one line each ("file:line: problem; what is done").
    problems: tuple[str, ...] = field(default=())

    def for_agent(self, agent_id: str) -> tuple[McpServer, ...]:
        """The enabled servers this agent gets."""
        return tuple(s for s in self.servers if s.for_agent(agent_id))

    def get(self, name: str) -> McpServer | None:
        return next((s for s in self.servers if s.name == name), None)


def load_mcp(path: Path | None = None) -> McpSettings:
    path = path or settings_path()
    try:
        found = tomlfile.read(path)
    except SettingsFileError as exc:
        return McpSettings(problems=(f"{exc}; no MCP servers are used",))
    if found is None:
        return McpSettings()
    text, data = found
    return parse_mcp(data, text, path)


def parse_mcp(data: dict[str, Any], text: str, path: Path) -> McpSettings:
    section = data.get("mcp", {})

    def where(table: str, key: str | None = None) -> str:
        line = (tomlfile.key_line(text, table, key) if key else
                tomlfile.table_line(text, table)) or tomlfile.key_line(text, "", "mcp")
        return f"{path}:{line}" if line else str(path)

    if not isinstance(section, dict):
        return McpSettings(problems=(f"{where('mcp')}: mcp must be a table ([mcp]); "
                                     "no MCP servers are used",))
    problems: list[str] = []
    on_failure = section.get("on_failure", CONTINUE)
    if on_failure not in ON_FAILURE:
        problems.append(f"{where('mcp', 'on_failure')}: mcp.on_failure must be "
                        f"{' or '.join(repr(v) for v in ON_FAILURE)}; using {CONTINUE!r}")
        on_failure = CONTINUE
    for key in sorted(set(section) - {"on_failure", "servers"}):
        problems.append(f"{where('mcp', key)}: mcp.{key}: unknown setting, ignored "
                        "(known: on_failure, servers)")
    tables = section.get("servers", {})
    servers: list[McpServer] = []
    if not isinstance(tables, dict):
        problems.append(f"{where('mcp', 'servers')}: mcp.servers must be a table of servers")
        tables = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            problems.append(f"{where('mcp.servers', name)}: mcp.servers.{name} must be a table; "
                            "left out")
            continue
        try:
            servers.append(from_table(name, table))
        except McpConfigError as exc:
            problems.append(f"{where(f'mcp.servers.{name}')}: {exc}; left out")
    return McpSettings(tuple(servers), str(on_failure), tuple(problems))
