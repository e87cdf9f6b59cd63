"""The control sockets' folder, with ``os.path`` only: no pathlib.

``tolaria abort ID`` (another terminal's Stop) needs this folder and its start-up is part of
the stop's latency; pathlib (with urllib.parse, ipaddress and re behind it) costs it 4-6 ms.
tolaria.support.paths builds on these functions, so the window, ``tolaria run`` and the client
always agree on the folder.
"""

from __future__ import annotations

import os
import stat
import sys

APP = "tolaria"
#: AF_UNIX paths are limited to 108 bytes on Linux (104 on macOS); keep a margin.
MAX_SOCKET_DIR = 80


class UnsafeFolder(PermissionError):
    """A socket folder that is a symlink, not a folder, or another user's: never used."""


def home() -> str | None:
    """``TOLARIA_HOME``, user-expanded and resolved (as ``Path.expanduser().resolve()``)."""
    value = os.environ.get("TOLARIA_HOME")
    return os.path.realpath(os.path.expanduser(value)) if value else None


def socket_dir() -> str:
    """Folder of the control sockets of every Tolaria process of this user (not created).

    Falls back to a short folder under the temp dir when the natural one is too long for an
    AF_UNIX path; the fallback name is derived from the natural one so every process of the same
    ``TOLARIA_HOME`` agrees on it.
    """
    h = home()
    if h:
        natural = os.path.join(h, "run")
    elif os.environ.get("XDG_RUNTIME_DIR") or sys.platform != "linux":
        import platformdirs

        natural = os.path.normpath(platformdirs.user_runtime_dir(APP))
    else:
        import tempfile

        natural = os.path.join(tempfile.gettempdir(), f"tolaria-{os.getuid()}")
    if len(natural) <= MAX_SOCKET_DIR:
        return natural
    import hashlib
    import tempfile

    digest = hashlib.sha256(natural.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"tolaria-{os.getuid()}-{digest}")


def check_own_folder(path: str | os.PathLike[str]) -> None:
    """UnsafeFolder unless ``path`` itself (not through a symlink) is a folder of ours."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFolder(f"{os.fspath(path)} is a symlink; refusing to use it for sockets")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFolder(f"{os.fspath(path)} is not a folder; refusing to use it for sockets")
    if info.st_uid != os.getuid():
        raise UnsafeFolder(f"{os.fspath(path)} belongs to another user; refusing to use it for "
                           "sockets")
