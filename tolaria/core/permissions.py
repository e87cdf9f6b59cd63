"""A permission question an agent asks before running a tool, and the callback that answers it.

Near the bottom of the core (it imports only the events): the ACP turn asks it for the agent's
``session/request_permission``, a model chat in safe mode asks it before each command
(tolaria/core/modelchat/command_approval.py), and the window answers both with the same card
(tolaria/qt/permissions.py, tolaria/ui/transcript/permission_card.py) through ``RunRequest.on_permission``.
A question is kept with its turn as a ``PermissionAsked`` event while it is open (and its end as
``PermissionSettled``): ``asked_event`` and ``request_of`` convert.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tolaria.core.events import PermissionAsked


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


def asked_event(key: str, request: PermissionRequest) -> PermissionAsked:
    """The question as its turn keeps it (the store, a rebuilt view)."""
    return PermissionAsked(request.stream_id, key=key, tool_id=request.tool_id,
                           title=request.title, input=request.input,
                           choices=tuple({"option_id": c.option_id, "name": c.name,
                                          "kind": c.kind} for c in request.choices),
                           tool_kind=request.kind)


def request_of(event: PermissionAsked) -> PermissionRequest:
    """The question of a kept ``PermissionAsked`` (inverse of ``asked_event``)."""
    choices = tuple(PermissionChoice(c.get("option_id", ""), c.get("name", ""),
                                     c.get("kind", "")) for c in event.choices)
    return PermissionRequest(event.stream_id, event.tool_id, event.title, event.input, choices,
                             event.tool_kind)
