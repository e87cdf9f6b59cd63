"""The window's attaching (ADR 0028): each file a composer was given (Attach…, paste, drop) is
checked and stored on a worker thread (``AttachmentDesk``), its thumbnail decoded there too, and
the answer comes back as the bridge's ``attachment_settled``: a 20 MB image never freezes the
window, and a FIFO or ``/dev/zero`` is refused at once without blocking anything.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QSize, Qt
from PySide6.QtGui import QImage, QImageReader

from tolaria.chats.attachments import AttachmentDesk
from tolaria.core.attachments.model import AttachError, Attachment
from tolaria.qt.bridge import Bridge
from tolaria.qt.tasks import TaskSet

#: Thumbnails are decoded at most this big (device pixels).
THUMB = 96
#: At most this many files per message; more in one drop are refused with one line.
MAX_FILES = 20


@dataclass(frozen=True)
class AttachIntent:
    """What a composer was given: files (``paths``), or an image without a file (``image``,
    pasted), each under the chip ``keys`` the composer shows while they are checked."""

    keys: tuple[str, ...]
    paths: tuple[str, ...] = ()
    image: QImage | None = None
    #: The chat's attachments not sent yet (for the per-chat cap).
    pending: tuple[Attachment, ...] = field(default=())


@dataclass(frozen=True)
class AttachSettled:
    """One chip's answer: the stored attachment and its thumbnail, or why not."""

    key: str
    attachment: Attachment | None = None
    thumbnail: QImage | None = None
    problem: str = ""


def thumbnail_of(path: str) -> QImage | None:
    """A small image decoded from the stored copy (scaled while decoding where the format can)."""
    reader = QImageReader(path)
    size = reader.size()
    if size.isValid() and max(size.width(), size.height()) > THUMB:
        reader.setScaledSize(size.scaled(QSize(THUMB, THUMB), Qt.AspectRatioMode.KeepAspectRatio))
    image = reader.read()
    return None if image.isNull() else image


def png_of(image: QImage) -> bytes:
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # the stubs want bytes; PySide wants str
    data: QByteArray = buffer.data()
    return bytes(data.data())


class AttachControl:
    """Attaches on a worker thread; answers through ``bridge.attachment_settled``."""

    def __init__(self, bridge: Bridge, desk: AttachmentDesk, tasks: TaskSet) -> None:
        self.bridge = bridge
        self.desk = desk
        self.tasks = tasks

    def configure(self, settings: object) -> None:
        """Preferences were saved: the next file is held to the caps saved (``Settings``)."""
        limits = getattr(settings, "attach_limits", None)
        if callable(limits):
            self.desk.limits = limits()

    def attach(self, conversation_id: int, intent: AttachIntent) -> None:
        self.tasks.spawn(self._run(conversation_id, intent), name="attach")

    async def _run(self, conversation_id: int, intent: AttachIntent) -> None:
        pending = list(intent.pending)
        if intent.image is not None:
            jobs = [(intent.keys[0], lambda: self._one_image(conversation_id, intent.keys[0],
                                                             intent.image, pending))]
        else:
            jobs = [(key, lambda key=key, path=path: self._one_file(  # type: ignore[misc]
                conversation_id, key, path, pending))
                for key, path in zip(intent.keys, intent.paths, strict=True)]
        for _key, job in jobs:
            settled = await asyncio.to_thread(job)
            # The chip is ready as soon as the copy is stored; its thumbnail follows (decoding
            # a 20 MB PNG takes longer than storing it: bench/attach_image.py).
            self.bridge.attachment_settled.emit(conversation_id, settled)
            if settled.attachment is not None:
                pending.append(settled.attachment)
                if settled.attachment.is_image:
                    path = str(self.desk.blobs.path(settled.attachment.sha256))
                    thumb = await asyncio.to_thread(thumbnail_of, path)
                    self.bridge.attachment_settled.emit(conversation_id, dataclasses.replace(
                        settled, thumbnail=thumb))

    def _one_file(self, conversation_id: int, key: str, path: str,
                  pending: Sequence[Attachment]) -> AttachSettled:
        try:
            attachment = self.desk.attach(path, conversation_id, pending)
        except AttachError as exc:  # the chip names the file: no folder in its line
            name = path.rstrip("/").rsplit("/", 1)[-1] or path
            return AttachSettled(key, problem=str(exc).replace(path, name, 1))
        return AttachSettled(key, attachment)

    def _one_image(self, conversation_id: int, key: str, image: QImage,
                   pending: Sequence[Attachment]) -> AttachSettled:
        try:
            attachment = self.desk.attach_bytes("pasted image.png", png_of(image),
                                                conversation_id, pending)
        except AttachError as exc:
            return AttachSettled(key, problem=str(exc))
        return AttachSettled(key, attachment)
