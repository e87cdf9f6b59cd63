"""Attaching files to a chat's next turn, for both front ends (ADR 0028).

``AttachmentDesk.attach`` checks a file (tolaria/core/attachments/check.py), holds it to the
per-file and per-chat caps (the settings' ``[attachments]``), and stores its private copy: from
then on the copy is what is sent, so a file deleted or changed before Send changes nothing.
``forget_chat`` removes the copies a deleted chat alone referred to.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.attachments.blobs import BlobStore
from tolaria.core.attachments.check import Checked, check_bytes, check_file
from tolaria.core.attachments.forms import refusal
from tolaria.core.attachments.model import AttachError, AttachLimits, Attachment, human_size
from tolaria.core.store.db import Store

#: How old an unreferenced copy must be before ``collect_orphans`` removes it: a copy attached
#: in a composer (not sent yet) is unreferenced too.
ORPHAN_AGE_S = 24 * 3600


class AttachmentDesk:
    def __init__(self, store: Store | None, blobs: BlobStore | None = None,
                 limits: AttachLimits | None = None) -> None:
        self.store = store
        self.blobs = blobs if blobs is not None else BlobStore()
        self.limits = limits if limits is not None else AttachLimits()

    def attach(self, path: str, conversation_id: int | None = None,
               pending: Sequence[Attachment] = ()) -> Attachment:
        """The file at ``path`` checked and stored; AttachError with the one-line reason."""
        return self._store(check_file(path, self.limits), conversation_id, pending)

    def attach_bytes(self, name: str, data: bytes, conversation_id: int | None = None,
                     pending: Sequence[Attachment] = ()) -> Attachment:
        """Bytes without a file (a pasted image) checked and stored like a file."""
        return self._store(check_bytes(name, data, self.limits), conversation_id, pending)

    def _store(self, checked: Checked, conversation_id: int | None,
               pending: Sequence[Attachment]) -> Attachment:
        sizes = {a.sha256: a.size for a in pending}
        if self.store is not None and conversation_id is not None:
            sizes.update(self.store.chat_attachment_sizes(conversation_id))
        sha = hashlib.sha256(checked.data).hexdigest()
        if sha not in sizes and sum(sizes.values()) + len(checked.data) > self.limits.max_chat:
            raise AttachError(f"{checked.name} ({human_size(len(checked.data))}) would take this "
                              f"chat over its {human_size(self.limits.max_chat)} of attachments "
                              "(settings.toml [attachments])")
        return self.blobs.put(checked)

    def missing(self, attachments: Iterable[Attachment]) -> str | None:
        """Why these can no longer be sent (a stored copy is gone), or None."""
        for attachment in attachments:
            if not self.blobs.has(attachment.sha256):
                return f"{attachment.name} is no longer stored; attach it again"
        return None

    def forget_chat(self, shas: Iterable[str], keep: Iterable[str] = ()) -> int:
        """After a chat was deleted: remove the copies of ``shas`` no other turn refers to
        (``keep``: also spare these, e.g. attached in a composer)."""
        if self.store is None:
            return 0
        referenced = self.store.referenced_attachments() | set(keep)
        removed = 0
        for sha in set(shas) - referenced:
            try:
                self.blobs.path(sha).unlink()
                removed += 1
            except (OSError, ValueError):
                continue
        return removed

    def collect_orphans(self, now: float | None = None) -> int:
        """Copies no turn refers to, older than ORPHAN_AGE_S, removed (at start-up)."""
        if self.store is None:
            return 0
        cutoff = (time.time() if now is None else now) - ORPHAN_AGE_S
        referenced = self.store.referenced_attachments()
        old = set()
        if self.blobs.root.is_dir():
            for folder in self.blobs.root.iterdir():
                if len(folder.name) == 2 and folder.is_dir():
                    for blob in folder.iterdir():
                        try:
                            if blob.stat().st_mtime >= cutoff:
                                old.add(blob.name)
                        except OSError:
                            continue
        return self.blobs.collect(referenced | old)


def delete_chat(store: Store, conversation_id: int, blobs: BlobStore | None = None) -> None:
    """Delete the chat, and then its attachments' copies (of its turns and of its queued
    messages) no other chat refers to."""
    shas = {a.sha256 for turn in store.turns(conversation_id)
            for a in store.attachments(turn.id)}
    shas |= {a.sha256 for message in store.queued(conversation_id) for a in message.attachments}
    store.delete_conversation(conversation_id)
    if shas:
        AttachmentDesk(store, blobs).forget_chat(shas)


def agent_refusal(manifest: Manifest, attachments: Sequence[Attachment]) -> str | None:
    """Why ``manifest``'s agent cannot take these (an image for an agent that takes none)."""
    return refusal(manifest.name, manifest.attachments, attachments)
