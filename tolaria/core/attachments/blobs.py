"""The stored copies: one private file per content, named by its SHA-256, under the data folder.

``<data>/attachments/ab/abcdef...`` (folders 0700, files 0600). A copy is written to a temporary
file and renamed into place, so a full disk or a crash never leaves a half copy under a real
name; the same bytes attached twice are stored once. A run gets its own *staged* folder with
the copies under their attached names (agents pick an image's type from its name), removed with
the run; the stored copies stay until no turn of any chat refers to them (``collect``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from tolaria.core.attachments.check import Checked
from tolaria.core.attachments.model import EXTENSION, AttachError, Attachment
from tolaria.support import paths

_SHA_RE = re.compile(r"[0-9a-f]{64}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
STAGED = "staged"


def default_root() -> Path:
    return paths.data_dir() / "attachments"


class BlobStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_root()

    def path(self, sha256: str) -> Path:
        if _SHA_RE.fullmatch(sha256) is None:
            raise ValueError(f"not a SHA-256: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def put(self, checked: Checked) -> Attachment:
        """Store ``checked`` (AttachError when it cannot be written: the disk is full...)."""
        sha = hashlib.sha256(checked.data).hexdigest()
        attachment = Attachment(checked.name, sha, len(checked.data), checked.mime, checked.kind)
        target = self.path(sha)
        if target.is_file() and target.stat().st_size == len(checked.data):
            return attachment
        try:
            folder = paths.private_dir(target.parent)
            tmp = folder / f".{sha}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                         | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                view = memoryview(checked.data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except OSError as exc:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)
            why = ("the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                   else exc.strerror or str(exc))
            raise AttachError(f"{checked.name} could not be stored: {why}") from None
        return attachment

    def read(self, attachment: Attachment) -> bytes:
        """The stored bytes (AttachError when the copy is gone)."""
        try:
            return self.path(attachment.sha256).read_bytes()
        except OSError:
            raise AttachError(f"{attachment.name} is no longer stored; attach it again") from None

    def stage(self, attachments: Iterable[Attachment], run: str) -> list[Path]:
        """Private copies of ``attachments`` under their names, in a folder of this run alone
        (hard links where the file system allows, else copies)."""
        folder = paths.private_dir(self.root / STAGED / _UNSAFE.sub("_", run))
        staged: list[Path] = []
        for index, attachment in enumerate(attachments, 1):
            source = self.path(attachment.sha256)
            if not source.is_file():
                raise AttachError(f"{attachment.name} is no longer stored; attach it again")
            target = folder / safe_name(attachment, index)
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            try:
                os.link(source, target)
            except OSError:
                try:
                    shutil.copyfile(source, target)
                    os.chmod(target, 0o600)
                except OSError as exc:
                    raise AttachError(f"{attachment.name} could not be copied for the agent: "
                                      f"{exc.strerror or exc}") from None
            staged.append(target)
        return staged

    def unstage(self, run: str) -> None:
        shutil.rmtree(self.root / STAGED / _UNSAFE.sub("_", run), ignore_errors=True)

    def collect(self, keep: set[str]) -> int:
        """Remove the stored copies no turn refers to (``keep``: the SHA-256s still referred
        to); returns how many went."""
        removed = 0
        if not self.root.is_dir():
            return 0
        for folder in self.root.iterdir():
            if len(folder.name) != 2 or not folder.is_dir():
                continue
            for blob in folder.iterdir():
                if _SHA_RE.fullmatch(blob.name) and blob.name not in keep:
                    with contextlib.suppress(OSError):
                        blob.unlink()
                        removed += 1
        return removed


def safe_name(attachment: Attachment, index: int) -> str:
    """A name fit for argv and ``@path`` (no spaces or shell-ish characters), unique in the run,
    with the image's true extension."""
    stem, dot, suffix = attachment.name.rpartition(".")
    if not dot:
        stem, suffix = suffix, ""
    stem = _UNSAFE.sub("_", stem).strip("._")[:80] or "file"
    ext = EXTENSION.get(attachment.mime)
    if ext is None:
        ext = "." + _UNSAFE.sub("_", suffix)[:16] if suffix else ""
    return f"{index}-{stem}{ext}"
