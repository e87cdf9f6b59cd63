"""A turn's attachments at spawn: refused, or staged as private copies and put in the agent's
own form (tolaria/core/attachments/forms.py), each one said with an ``Attached`` event.

Refused before the agent starts: an image for an agent that takes none, a stored copy that is
gone. The staged folder belongs to the run and is removed with it (``Staged.close``).
"""

from __future__ import annotations

import dataclasses

from tolaria.core.attachments.blobs import BlobStore
from tolaria.core.attachments.forms import HOW_WORDS, deliver, refusal
from tolaria.core.attachments.model import AttachError
from tolaria.core.events import Attached, EventCallback
from tolaria.core.turns.request import RunRequest


class Staged:
    """The run's staged copies; ``close`` removes them (the stored copies stay)."""

    def __init__(self, blobs: BlobStore | None, run: str) -> None:
        self.blobs, self.run = blobs, run

    def close(self) -> None:
        if self.blobs is not None:
            self.blobs.unstage(self.run)


def prepare(request: RunRequest, stream_id: str, emit: EventCallback,
            blobs: BlobStore | None = None) -> tuple[RunRequest, Staged] | str:
    """``request`` with its attachments in the agent's form, or why it cannot run."""
    if not request.attachments:
        return request, Staged(None, stream_id)
    manifest = request.manifest
    spec = manifest.attachments
    problem = refusal(manifest.name, spec, request.attachments)
    if problem:
        return problem
    blobs = blobs or BlobStore()
    try:
        staged = blobs.stage(request.attachments, stream_id)
        delivery = deliver(spec, request.prompt, request.attachments, staged, blobs.read)
    except AttachError as exc:
        blobs.unstage(stream_id)
        return str(exc)
    except OSError as exc:  # the run's private folder could not be made (a full disk...)
        blobs.unstage(stream_id)
        return f"the attachments could not be prepared for {manifest.name}: " \
               f"{exc.strerror or exc}"
    for attachment, form, _path in delivery.sent:
        emit(Attached(stream_id, name=attachment.name, size=attachment.size,
                      mime=attachment.mime, sha256=attachment.sha256, form=form,
                      how=HOW_WORDS.get(form, form),
                      note=spec.note if attachment.is_image else ""))
    return (dataclasses.replace(request, prompt=delivery.prompt,
                                extra_args=tuple(delivery.args),
                                content_blocks=tuple(delivery.blocks)),
            Staged(blobs, stream_id))
