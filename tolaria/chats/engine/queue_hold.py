"""A queued message the chat's agent cannot take now (issue 26): an image queued before the
chat was switched to an agent that takes none (or to another host, which cannot read this
machine's files). The queue waits at that message: what was typed before it goes, it and what
follows stay, in order, and nothing is sent half. Taking the images off the message
(``DROP_FILES``) or switching back lets it go.

Nothing is stored for this: which message is held follows from the queue and the chat's agent
and host, so it is the same after a restart (the queue and its files are kept: migration 9).
"""

from __future__ import annotations

from collections.abc import Sequence

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.attachments.forms import refusal
from tolaria.core.store.db import Conversation
from tolaria.core.store.queue import QueuedMessage


def holds_all_files(why: str) -> bool:
    """Whether a hold said ``why`` is lifted by taking off all files (on a host), not only the
    images (an agent that takes no images)."""
    return why.startswith("The agent on ")


def hold_reason(conversation: Conversation | None, manifest: Manifest | None,
                message: QueuedMessage) -> str | None:
    """Why ``message`` cannot go to the chat's agent now, as its chip says it; None if it can."""
    if not message.attachments or conversation is None:
        return None
    if conversation.host:
        return (f"The agent on {conversation.host} cannot read this machine's files: remove "
                "them or switch back to this computer")
    if manifest is None or refusal(manifest.name, manifest.attachments,
                                   message.attachments) is None:
        return None
    return f"{manifest.name} here takes no images: remove the image or switch back"


def first_held(conversation: Conversation | None, manifest: Manifest | None,
               messages: Sequence[QueuedMessage]) -> tuple[int, str] | None:
    """The index in ``messages`` of the first that cannot go, and why; None if all can."""
    for index, message in enumerate(messages):
        why = hold_reason(conversation, manifest, message)
        if why is not None:
            return index, why
    return None
