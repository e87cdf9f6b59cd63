"""What an attachment is once checked and stored: a noun, with the limits it was checked by.

An attachment is identified by the SHA-256 of its bytes (``blobs.py`` keeps one copy per
content); ``name`` is the file name the user attached, never a path (the path may be gone by
Send: the stored copy is what is sent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

IMAGE = "image"
TEXT = "text"
BINARY = "binary"
KINDS = (IMAGE, TEXT, BINARY)

MB = 1024 * 1024
#: Default caps (settings ``[attachments] max_file_mb`` / ``max_chat_mb``).
DEFAULT_MAX_FILE = 32 * MB
DEFAULT_MAX_CHAT = 256 * MB


class AttachError(ValueError):
    """A file that cannot be attached: ``str()`` is the one line shown on the chip or printed by
    ``tolaria run`` (it names the file)."""


@dataclass(frozen=True)
class AttachLimits:
    #: Bytes one file may have.
    max_file: int = DEFAULT_MAX_FILE
    #: Bytes all attachments of one chat may have together (counted once per content).
    max_chat: int = DEFAULT_MAX_CHAT


@dataclass(frozen=True)
class Attachment:
    #: The file's name as attached (no folder).
    name: str
    #: Hex SHA-256 of the bytes: the key of the stored copy.
    sha256: str
    size: int
    #: ``image/png``, ``image/jpeg``, ``image/gif``, ``image/webp`` (sniffed from the bytes),
    #: ``text/plain`` or ``application/octet-stream``.
    mime: str
    #: One of KINDS.
    kind: str

    @property
    def is_image(self) -> bool:
        return self.kind == IMAGE

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "size": self.size, "mime": self.mime,
                "kind": self.kind}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attachment:
        return cls(str(data["name"]), str(data["sha256"]), int(data["size"]), str(data["mime"]),
                   str(data["kind"]))


def human_size(size: int) -> str:
    """``1.2 MB``, ``340 KB``, ``12 bytes``: for chips, refusals and the transcript."""
    if size >= MB:
        return f"{size / MB:.1f} MB"
    if size >= 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size} byte" + ("" if size == 1 else "s")


_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
#: Names that promise an image: a file so named whose bytes are none is refused, not sent as
#: a file (the user meant an image; sending its bytes as text would be a silent surprise).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
EXTENSION = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif",
             "image/webp": ".webp"}


def sniff_image(head: bytes | bytearray) -> str | None:
    """The image type the bytes say (never the name), or None."""
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def sniff_text(data: bytes | bytearray) -> bool:
    """Whether ``data`` reads as UTF-8 text (what an agent can take inline)."""
    if b"\0" in data[:65536]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
