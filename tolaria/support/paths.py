"""Where Tolaria keeps config, data and control sockets.

``TOLARIA_HOME`` isolates everything (tests and several side-by-side installs rely on it):
config files and user adapters live directly in it, data under ``data/`` and sockets under
``run/``. Without it, the platform's usual folders are used (platformdirs).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from pathlib import Path

from tolaria.support import sockdir

# Re-exported: callers catch paths.UnsafeFolder.
from tolaria.support.sockdir import UnsafeFolder as UnsafeFolder
from tolaria.support.sockdir import check_own_folder as check_own_folder

# platformdirs is imported where needed: with TOLARIA_HOME set nothing needs it. The light
# client of ``tolaria abort`` (a stop's latency) uses tolaria.support.sockdir, not this module.

APP = sockdir.APP


def home() -> Path | None:
    h = sockdir.home()
    return Path(h) if h else None


def config_dir() -> Path:
    h = home()
    if h:
        return h
    import platformdirs

    return Path(platformdirs.user_config_dir(APP))


def data_dir() -> Path:
    h = home()
    if h:
        return h / "data"
    import platformdirs

    return Path(platformdirs.user_data_dir(APP))


#: Sub-folders of the data folder that hold chat text (prompts, answers, tracebacks).
PRIVATE_SUBDIRS = ("model-chats", "crash-reports")


def private_dir(path: Path) -> Path:
    """``path`` created (with its parents) or tightened to mode 0700: what is in it is private.

    ``mkdir(mode=...)`` applies the mode only to the last component, so each missing parent is
    created 0700 too. A folder we do not own is left alone (chmod would fail anyway).
    """
    missing: list[Path] = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    tighten(path, 0o700)
    return path


def private_data_dir() -> Path:
    """The data folder, 0700, with the files of earlier installs (made 0755/0644 before the
    umask was respected) tightened: another local user must not read prompts or answers."""
    folder = private_dir(data_dir())
    for name in PRIVATE_SUBDIRS:
        sub = folder / name
        if sub.is_dir() and not sub.is_symlink():
            tighten(sub, 0o700)
            with contextlib.suppress(OSError):
                for child in sub.iterdir():
                    tighten(child, 0o600)
    return folder


def private_file(path: Path) -> None:
    """``path`` created empty if missing, mode 0600 (SQLite gives its -wal/-shm the same mode)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                         0o600))
    tighten(path, 0o600)


def tighten(path: Path, mode: int) -> None:
    """chmod ``path`` to ``mode`` when it is ours and looser; never through a symlink.

    Not on Windows: there chmod only sets the read-only flag, and the user's profile (where
    platformdirs puts everything) is private by its ACL."""
    if sys.platform == "win32":
        return
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o777 & ~mode == 0:
        return
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IMODE(st.st_mode) & mode)


def user_adapters_dir() -> Path:
    return config_dir() / "adapters"


def socket_dir(create: bool = True) -> Path:
    """Folder of the control sockets of every Tolaria process of this user (mode 0700); see
    tolaria.support.sockdir (shared with the light client of ``tolaria abort``)."""
    path = Path(sockdir.socket_dir())
    if create:
        sockdir.make_own_folder(str(path))
    return path


#: Errors of the environment (a read-only or full home, a folder of another user), not bugs.
_ACCESS_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}


def access_problem(exc: BaseException) -> str | None:
    """One line for an OSError the user must fix in their file system ("cannot write to PATH:
    read-only file system"); None for any other error (a bug: let it reach the crash report)."""
    if isinstance(exc, UnsafeFolder):
        return str(exc)
    if not isinstance(exc, OSError) or exc.errno not in _ACCESS_ERRNOS:
        return None
    reason = (exc.strerror or os.strerror(exc.errno)).lower()
    return f"cannot write to {exc.filename}: {reason}" if exc.filename else reason


def package_data(name: str) -> Path:
    """``adapters`` or ``resources``: shipped inside the wheel, at the top level of a checkout."""
    here = Path(__file__).resolve().parent.parent  # the tolaria package
    installed = here / "_data" / name
    if installed.is_dir():
        return installed
    return here.parent / name
