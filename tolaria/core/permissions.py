"""A permission question an agent asks before running a tool, and the callback that answers it.

A leaf of the core (it imports nothing of Tolaria): the ACP turn asks it for the agent's
``session/request_permission``, a model chat in safe mode asks it before each command
(tolaria/core/modelchat/command_approval.py), and the window answers both with the same card
(tolaria/qt/permissions.py, tolaria/ui/permission_card.py) through ``RunRequest.on_permission``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PermissionChoice:
    """One answer the agent offers: ``kind`` is allow_once, allow_always, reject_once or
    reject_always."""

    option_id: str
    name: str
    kind: str


@dataclass(frozen=True)
class PermissionRequest:
    """The agent asks before running a tool (``session/request_permission``)."""

    stream_id: str
    tool_id: str
    title: str
    input: Any
    choices: tuple[PermissionChoice, ...]
    #: The tool's kind (ACP: read, edit, delete, move, search, execute, think, fetch, other),
    #: "" when the agent did not say: what an "allow always" answer is remembered for.
    kind: str = ""

    def choice(self, *kinds: str) -> PermissionChoice | None:
        """The first offered choice of the first of ``kinds`` that is offered."""
        for kind in kinds:
            for choice in self.choices:
                if choice.kind == kind:
                    return choice
        return None


#: Answers a PermissionRequest with the chosen ``option_id``, or None to cancel it.
PermissionCallback = Callable[[PermissionRequest], Awaitable[str | None]]
