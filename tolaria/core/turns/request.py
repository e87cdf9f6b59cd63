"""What a caller asks of one agent turn: the leaf every turn kind and every caller shares.

Apart from the runner (which chooses the turn kind and so imports them all) so that the turn
kinds, the chat service and the CLI can name a request without importing the dispatcher.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.attachments.model import Attachment
from tolaria.core.mcp.servers import McpServer
from tolaria.core.permissions import PermissionCallback
from tolaria.core.remote.hosts import Target

#: Seconds to wait for a stopped agent's tree to go before SIGKILL.
DEFAULT_GRACE_S = 2.0
#: Seconds an agent may keep retrying its model requests before the run is cut off.
DEFAULT_RETRY_LIMIT_S = 60.0


@dataclass(frozen=True)
class RunRequest:
    manifest: Manifest
    prompt: str
    cwd: str | None = None
    #: Extra environment for this run only (on top of the manifest's ``[env]``).
    env: Mapping[str, str] = field(default_factory=dict)
    #: Continue this agent session (only used when the manifest has ``resume`` arguments).
    session_id: str | None = None
    #: ACP agents with ``permissions = "safe"``: asked for each permission request (the chosen
    #: option id, or None to cancel it); without it "safe" rejects. Answered None on Stop.
    on_permission: PermissionCallback | None = None
    #: CLI agents: once the agent has been retrying its model requests (as its runtime reports)
    #: for this many seconds, the run is stopped like a Stop and reported as an error. None or
    #: 0: never. An agent that retries *silently* is not cut off (see docs/retries.md).
    retry_limit_s: float | None = DEFAULT_RETRY_LIMIT_S
    #: "safe" or "full" for this run (tolaria.core.adapters.manifest.PERMISSION_MODES); None uses the
    #: manifest's ``permissions``. Picks the manifest's ``[permission_args]`` for a CLI and
    #: how an ACP agent's permission requests are answered.
    permission_mode: str | None = None
    #: Protocol ``openai-chat``: use this model instead of the manifest's ``model``.
    model: str | None = None
    #: Keep the agent process for the next turn of this conversation key (docs/adr/0009): only
    #: for agents that can end a turn without exiting (ACP, Claude's stream-json input with the
    #: interrupt). None (one-shot callers: ``tolaria run``, fan-out): one process per turn.
    keep_key: str | None = None
    #: The MCP servers meant for this agent (settings ``[mcp.servers.*]``), passed in its own
    #: form at spawn (tolaria/core/mcp/forms.py, ADR 0019); ``${VAR}`` is expanded then.
    mcp_servers: tuple[McpServer, ...] = ()
    #: A server that cannot be passed: "continue" (said in the chat, the run goes on without
    #: it) or "refuse" (the turn ends with an error, the agent is not started).
    mcp_on_failure: str = "continue"
    #: Files attached to this turn (stored copies, tolaria/core/attachments/; ADR 0028): the
    #: runner puts them in the agent's own form (``extra_args``, ``content_blocks``, the prompt).
    attachments: tuple[Attachment, ...] = ()
    #: Set by the runner from ``attachments``: arguments before the command's ``--``.
    extra_args: tuple[str, ...] = ()
    #: Set by the runner from ``attachments``: Claude stream-json blocks after the prompt's.
    content_blocks: tuple[dict[str, Any], ...] = ()
    #: Files the prompt mentions (``@path``, absolute): an ACP agent also gets a
    #: ``resource_link`` for each (every ACP agent takes those; chats/mentions/forms.py).
    mention_links: tuple[str, ...] = ()
    #: Run the agent on another machine (an ssh host or a command target; ADR 0026) instead
    #: of here. None: this machine.
    target: Target | None = None
