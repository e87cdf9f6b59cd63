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
#: ``sun_path`` holds 108 bytes on Linux, 104 on macOS and the BSDs, NUL included. A socket is
#: ``<folder>/<pid>.sock`` and a pid has at most 10 digits: a folder of at most 80 bytes (its
#: file-system encoding, not its characters) leaves every socket path a margin on all of them.
MAX_SOCKET_DIR = 80
#: Where the short fallback folder goes when the temp dir is itself too long (a deep
#: ``$TMPDIR``): /tmp exists on Linux and macOS, and the folder is checked to be ours.
SHORT_TMP = "/tmp"


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
        # macOS: ~/Library/Caches/TemporaryItems/tolaria; Windows: under %LOCALAPPDATA%.
        import platformdirs

        natural = os.path.normpath(platformdirs.user_runtime_dir(APP))
    else:
        import tempfile

        natural = os.path.join(tempfile.gettempdir(), f"tolaria-{user_tag()}")
    return short_enough(natural)


def fits(folder: str) -> bool:
    """Whether sockets in ``folder`` fit ``sun_path`` (measured in bytes, as the kernel does)."""
    return len(os.fsencode(folder)) <= MAX_SOCKET_DIR


def short_enough(natural: str) -> str:
    """``natural``, or when it is too long for a socket path a short folder named after it
    (``tolaria-<uid>-<hash>``) in the temp dir, or in /tmp when the temp dir is long too (on
    macOS ``$TMPDIR`` is a per-user folder under /var/folders, which an admin can make deep).
    Derived from ``natural`` only, so every process of the same ``TOLARIA_HOME`` agrees."""
    if fits(natural):
        return natural
    import hashlib
    import tempfile

    digest = hashlib.sha256(os.fsencode(natural)).hexdigest()[:16]
    name = f"tolaria-{user_tag()}-{digest}"
    short = os.path.join(tempfile.gettempdir(), name)
    return short if fits(short) else os.path.join(SHORT_TMP, name)


def user_tag() -> str:
    """This user in a folder name: the uid; on Windows (no uids) a hash of the user name."""
    if sys.platform == "win32":
        import getpass
        import hashlib

        return hashlib.sha256(getpass.getuser().encode()).hexdigest()[:8]
    return str(os.getuid())


def check_own_folder(path: str | os.PathLike[str]) -> None:
    """UnsafeFolder unless ``path`` itself (not through a symlink) is a folder of ours."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFolder(f"{os.fspath(path)} is a symlink; refusing to use it for sockets")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFolder(f"{os.fspath(path)} is not a folder; refusing to use it for sockets")
    # Windows has no uids (st_uid is 0): there the folder is in the user's own profile.
    if sys.platform != "win32" and info.st_uid != os.getuid():
        raise UnsafeFolder(f"{os.fspath(path)} belongs to another user; refusing to use it for "
                           "sockets")


def make_own_folder(path: str) -> None:
    """Make ``path`` (mode 0700) or check it: a folder we own, reached without a symlink.

    In a shared /tmp another user can create ``tolaria-<uid>`` first, as a folder of theirs or
    a symlink to a folder of ours: following it would chmod, and put our sockets in, a folder
    of their choosing. So it is checked with lstat, then opened with O_NOFOLLOW and checked
    again through the fd (no swap in between), and the chmod goes through that same fd.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:  # noqa: SIM105 - contextlib is one more import on the way to listening
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    check_own_folder(path)
    if sys.platform == "win32":  # no uids, no fchmod: the profile's ACL keeps it private
        return
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UnsafeFolder(f"{path} changed while it was checked; refusing to use it for "
                           "sockets") from exc
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid():
            raise UnsafeFolder(f"{path} belongs to another user; refusing to use it for sockets")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
