"""Where Tolaria keeps config, data and control sockets.

``TOLARIA_HOME`` isolates everything (tests and several side-by-side installs rely on it):
config files and user adapters live directly in it, data under ``data/`` and sockets under
``run/``. Without it, the platform's usual folders are used (platformdirs).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# platformdirs, tempfile and hashlib are imported where needed: with TOLARIA_HOME set,
# ``tolaria abort`` (whose start-up is part of a stop's latency) needs none of them.

APP = "tolaria"
#: AF_UNIX paths are limited to 108 bytes on Linux (104 on macOS); keep a margin.
_MAX_SOCKET_DIR = 80


def home() -> Path | None:
    value = os.environ.get("TOLARIA_HOME")
    return Path(value).expanduser().resolve() if value else None


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


def user_adapters_dir() -> Path:
    return config_dir() / "adapters"


def socket_dir(create: bool = True) -> Path:
    """Folder of the control sockets of every Tolaria process of this user (mode 0700).

    Falls back to a short folder under the temp dir when the natural one is too long for an
    AF_UNIX path; the fallback name is derived from the natural one so every process of the same
    ``TOLARIA_HOME`` agrees on it.
    """
    h = home()
    if h:
        natural = h / "run"
    elif os.environ.get("XDG_RUNTIME_DIR") or sys.platform != "linux":
        import platformdirs

        natural = Path(platformdirs.user_runtime_dir(APP))
    else:
        import tempfile

        natural = Path(tempfile.gettempdir()) / f"tolaria-{os.getuid()}"
    path = natural
    if len(str(natural)) > _MAX_SOCKET_DIR:
        import hashlib
        import tempfile

        digest = hashlib.sha256(str(natural).encode()).hexdigest()[:16]
        path = Path(tempfile.gettempdir()) / f"tolaria-{os.getuid()}-{digest}"
    if create:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.stat().st_uid != os.getuid():
            raise PermissionError(f"{path} belongs to another user; refusing to use it for sockets")
        os.chmod(path, 0o700)
    return path


def package_data(name: str) -> Path:
    """``adapters`` or ``resources``: shipped inside the wheel, at the top level of a checkout."""
    here = Path(__file__).resolve().parent.parent  # the tolaria package
    installed = here / "_data" / name
    if installed.is_dir():
        return installed
    return here.parent / name
