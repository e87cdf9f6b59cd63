"""Safe mode of a direct model chat: each ``run_command`` is approved by the user first.

The question has the shape of an ACP permission request (``PermissionRequest`` with allow once,
allow always and reject choices), so the chat window answers both with the same prompt through
``RunRequest.on_permission``. "Allow always" stops the asking for the rest of the turn (the chat
window also remembers it for the conversation). Without a callback (headless runs) safe mode
cannot ask, so commands are not run and the model is told why. Every answer is kept with the
turn as a ``diagnostic(source="permission")``. The read-only tools are never asked about.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tolaria.core.events import Diagnostic, Event, EventCallback, ToolStart
from tolaria.core.permissions import PermissionCallback, PermissionChoice, PermissionRequest

log = logging.getLogger(__name__)

DECLINED = "The user declined to run this command."
NO_ONE_TO_ASK = ("Not run: this chat is in \"safe\" mode, which asks the user before each "
                 "command, and there is no one to ask here.")
COMMAND_KIND = "execute"
CHOICES = (PermissionChoice("allow_once", "Allow once", "allow_once"),
           PermissionChoice("allow_always", "Allow always", "allow_always"),
           PermissionChoice("reject_once", "Reject", "reject_once"))
_ALLOW = ("allow_once", "allow_always")


class CommandApproval:
    """``Toolbox.approve_command`` for one turn; also sees the turn's events (``on_event``) to
    know which tool call a command belongs to."""

    def __init__(self, stream_id: str, hook: PermissionCallback | None, emit: EventCallback,
                 redact: Callable[[str], str] = lambda text: text) -> None:
        self.stream_id = stream_id
        self.hook = hook
        self.emit = emit
        self.redact = redact
        self.always = False
        self._tool_id = ""

    def on_event(self, event: Event) -> None:
        if isinstance(event, ToolStart):
            self._tool_id = event.tool_id
        self.emit(event)

    def _note(self, message: str) -> None:
        self.emit(Diagnostic(self.stream_id, source="permission", message=message))

    async def __call__(self, command: str) -> str | None:
        shown = self.redact(command)
        if self.always:
            return None
        if self.hook is None:
            self._note(f"did not run {shown!r}: permissions = \"safe\" and no one to ask "
                       "(set permissions = \"full\" in the model's manifest to run commands "
                       "without asking)")
            return NO_ONE_TO_ASK
        request = PermissionRequest(self.stream_id, self._tool_id, shown, {"command": shown},
                                    CHOICES, kind=COMMAND_KIND)
        try:
            answer = await self.hook(request)
        except Exception as exc:
            log.exception("permission callback failed for %s", self.stream_id)
            self._note(f"permission prompt failed ({exc}); {shown!r} not run")
            return DECLINED
        chosen = next((c for c in CHOICES if c.option_id == answer), None)
        if chosen is None or chosen.kind not in _ALLOW:
            self._note(f"you rejected {shown!r}" + (f" ({chosen.name})" if chosen else ""))
            return DECLINED
        self.always = chosen.kind == "allow_always"
        self._note(f"you allowed {shown!r} ({chosen.name})")
        return None
