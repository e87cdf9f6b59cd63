"""Checking a file at attach time: what it is (by its bytes), whether it may be attached, and its
bytes read within the cap, never hanging.

Hostile input gets a specific one-line refusal that names the file: a path with a newline or a
NUL (it would break an argv or a ``@path`` reference), a folder, a FIFO (opened non-blocking, so
``open`` never waits for a writer), a device such as ``/dev/zero`` (refused before any read; every
read is capped anyway), a file over the cap (from its size, and again while reading: it may grow),
a name that promises an image over bytes that are none.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from tolaria.core.attachments.model import (
    BINARY,
    IMAGE,
    IMAGE_SUFFIXES,
    TEXT,
    AttachError,
    AttachLimits,
    human_size,
    sniff_image,
    sniff_text,
)

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Checked:
    """A file that may be attached, with its bytes."""

    name: str
    #: The bytes, held once (a file's are read into one buffer in place).
    data: bytes | bytearray
    mime: str
    kind: str


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot even be looked at (before touching the file system), or None."""
    shown = _shown(path)
    if not path:
        return "an empty path cannot be attached"
    if "\0" in path:
        return f"{shown}: the path holds a NUL character; rename the file to attach it"
    if "\n" in path or "\r" in path:
        return f"{shown}: the path holds a line break; rename the file to attach it"
    return None


def _shown(path: str) -> str:
    """The path as one printable line (a newline or NUL shown escaped)."""
    return path.encode("unicode_escape", "backslashreplace").decode("ascii") \
        if any(c in path for c in "\0\n\r") else path


def _kind_word(mode: int) -> str:
    for test, word in ((stat.S_ISDIR, "a folder: attach the files in it one by one"),
                       (stat.S_ISFIFO, "a FIFO (named pipe), not a file"),
                       (stat.S_ISCHR, "a device, not a file"),
                       (stat.S_ISBLK, "a device, not a file"),
                       (stat.S_ISSOCK, "a socket, not a file")):
        if test(mode):
            return word
    return "not a regular file"


def check_file(path: str, limits: AttachLimits) -> Checked:
    """The file at ``path`` read and classified, or AttachError with the one-line reason."""
    problem = path_problem(path)
    if problem:
        raise AttachError(problem)
    name = Path(path).name or path
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise AttachError(f"{path}: no such file (was it moved or deleted?)") from None
    except OSError as exc:
        raise AttachError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise AttachError(f"{path} is {_kind_word(info.st_mode)}")
    _check_size(name, info.st_size, limits)
    return check_bytes(name, _read_capped(path, name, limits), limits)


def check_bytes(name: str, data: bytes | bytearray, limits: AttachLimits) -> Checked:
    """Bytes that came without a file (a pasted image), classified like a file's."""
    _check_size(name, len(data), limits)
    mime = sniff_image(data[:16])
    if mime is not None:
        return Checked(name, data, mime, IMAGE)
    if name.lower().endswith(IMAGE_SUFFIXES):
        raise AttachError(f"{name} is named like an image but is not one (its bytes are not "
                          "PNG, JPEG, GIF or WebP)")
    if sniff_text(data):
        return Checked(name, data, "text/plain", TEXT)
    return Checked(name, data, "application/octet-stream", BINARY)


def _check_size(name: str, size: int, limits: AttachLimits) -> None:
    if size > limits.max_file:
        raise AttachError(f"{name} is {human_size(size)}; the limit is "
                          f"{human_size(limits.max_file)} per file (settings.toml [attachments])")


def _read_capped(path: str, name: str, limits: AttachLimits) -> bytearray:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise AttachError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)  # it may have been swapped for a FIFO since the stat
        if not stat.S_ISREG(info.st_mode):
            raise AttachError(f"{path} is {_kind_word(info.st_mode)}")
        # One buffer of the size the file says (+1 to see it grow), read into in place: the
        # bytes are held once, not as chunks and their join (a 20 MB image: 20 MB, not 40).
        buffer = bytearray(min(info.st_size, limits.max_file) + 1)
        view = memoryview(buffer)
        size = 0
        with open(fd, "rb", buffering=0, closefd=False) as raw:
            while True:
                if size == len(buffer):  # it grew while we read it
                    if size > limits.max_file:
                        _check_size(name, size, limits)
                    buffer.extend(bytes(min(_CHUNK, limits.max_file + 1 - size)))
                    view.release()
                    view = memoryview(buffer)
                got = raw.readinto(view[size:])
                if not got:
                    break
                size += got
        view.release()
        del buffer[size:]
        return buffer
    except OSError as exc:
        raise AttachError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


__all__ = ["BINARY", "IMAGE", "TEXT", "Checked", "check_bytes", "check_file", "path_problem"]
