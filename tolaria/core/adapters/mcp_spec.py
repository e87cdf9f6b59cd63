"""The ``[mcp]`` table of an adapter manifest: in which form the agent takes the MCP servers
Tolaria passes it at run time (tolaria/core/mcp/forms.py renders them; ADR 0019).

```toml
[mcp]
form = "claude-json"             # or codex-config, gemini-settings, opencode-config, acp, none
transports = ["stdio", "http", "sse"]
settings_env = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"   # gemini-settings only: the variable that
                                                   # points the CLI at Tolaria's settings file
home_env = "GEMINI_CLI_HOME"     # gemini-settings, optional: the variable naming the CLI's home;
                                 # a private one (the user's entries linked) is used instead of
                                 # settings_env, which only a run on a host then uses
```

A manifest without the table takes none: Preferences says so for each server ("not passed:
<agent> cannot be given MCP servers by Tolaria").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tolaria.core.mcp.servers import STDIO, TRANSPORTS

NONE = "none"
CLAUDE_JSON = "claude-json"
CODEX_CONFIG = "codex-config"
GEMINI_SETTINGS = "gemini-settings"
OPENCODE_CONFIG = "opencode-config"
ACP_FORM = "acp"
FORMS = (NONE, CLAUDE_JSON, CODEX_CONFIG, GEMINI_SETTINGS, OPENCODE_CONFIG, ACP_FORM)
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYS = {"form", "transports", "settings_env", "home_env"}


@dataclass(frozen=True)
class McpSpec:
    #: One of FORMS: how the servers reach the agent (argv, a private file, ACP session/new).
    form: str = NONE
    #: The transports the agent takes (an ACP agent: at most these, as its capabilities say).
    transports: tuple[str, ...] = (STDIO,)
    #: ``gemini-settings``: the environment variable naming the settings file Tolaria writes.
    settings_env: str = ""
    #: ``gemini-settings``, optional: the variable naming the CLI's home (a private home, the
    #: user's entries linked, then carries the servers; Gemini CLI: GEMINI_CLI_HOME).
    home_env: str = ""

    @property
    def takes_servers(self) -> bool:
        return self.form != NONE


def parse_mcp_spec(value: object, fail: Callable[[str, str], Exception]) -> McpSpec:
    """The ``[mcp]`` table; ``fail(key, reason)`` builds the manifest's error."""
    if not isinstance(value, dict):
        raise fail("mcp", "must be a table (form = ..., transports = [...])")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise fail(f"mcp.{unknown[0]}", f"unknown key (known: {', '.join(sorted(_KEYS))})")
    form = value.get("form", NONE)
    if form not in FORMS:
        raise fail("mcp.form", f"must be one of {', '.join(FORMS)}, got {form!r}")
    transports = value.get("transports", [STDIO])
    if (not isinstance(transports, list) or not transports
            or any(t not in TRANSPORTS for t in transports)):
        raise fail("mcp.transports", f"must be a non-empty list of {', '.join(TRANSPORTS)}")
    settings_env = value.get("settings_env", "")
    if form == GEMINI_SETTINGS:
        if not isinstance(settings_env, str) or not _ENV_NAME_RE.fullmatch(settings_env):
            raise fail("mcp.settings_env", "must name the environment variable that points "
                                           "the CLI at a settings file")
    elif settings_env:
        raise fail("mcp.settings_env", f"only used with form = \"{GEMINI_SETTINGS}\"")
    home_env = value.get("home_env", "")
    if home_env and form != GEMINI_SETTINGS:
        raise fail("mcp.home_env", f"only used with form = \"{GEMINI_SETTINGS}\"")
    if home_env and (not isinstance(home_env, str) or not _ENV_NAME_RE.fullmatch(home_env)):
        raise fail("mcp.home_env", "must name the environment variable that points the CLI "
                                   "at its home folder")
    return McpSpec(form=str(form), transports=tuple(dict.fromkeys(transports)),
                   settings_env=str(settings_env), home_env=str(home_env))
