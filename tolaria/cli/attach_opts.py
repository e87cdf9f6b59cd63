"""``tolaria run --attach FILE`` (repeatable): each file checked and stored as in the window
(tolaria/chats/attachments.py), and refused before anything starts with one line naming the
agent or the file (exit 2). How each one then went to the agent is the run's ``attached`` events
(``--json``: one per file)."""

from __future__ import annotations

from collections.abc import Sequence

from tolaria.chats.attachments import AttachmentDesk, agent_refusal
from tolaria.config.settings import load_settings
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.attachments.model import AttachError, Attachment
from tolaria.core.store.db import Store


def attach_files(paths: Sequence[str], manifest: Manifest, store: Store | None,
                 conversation_id: int | None) -> tuple[Attachment, ...] | str:
    """The stored attachments, or the one line that says why the run cannot start."""
    if not paths:
        return ()
    settings, _problems = load_settings()
    desk = AttachmentDesk(store, limits=settings.attach_limits())
    attached: list[Attachment] = []
    for path in paths:
        try:
            attached.append(desk.attach(path, conversation_id, attached))
        except AttachError as exc:
            return f"cannot attach {exc}" if not str(exc).startswith(path) else str(exc)
    return agent_refusal(manifest, attached) or tuple(attached)
