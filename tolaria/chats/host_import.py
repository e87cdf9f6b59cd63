"""The sessions the CLIs stored on a host, imported as chats on that host (issue 25.6, ADR 0035):
``tolaria import --host H`` and the window's "Import sessions from a host" share this.

The host's session files come in one round trip (importers/remote.py) into a private 0700
folder, are read by the same parsers as local files, and the folder is removed. What is
imported is what the files held when they were read there: a session that grows afterwards
adds its new turns at the next import (a turn the CLI had not answered yet is an unfinished
turn, continued then), never a half chat. Blocking: the window runs it off its thread.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tolaria.chats.importers import IMPORTERS
from tolaria.chats.importers.remote import fetch_sessions
from tolaria.chats.importing import ImportReport, import_sessions
from tolaria.core.remote.hostcall import CancelFlag
from tolaria.core.remote.hosts import Target
from tolaria.core.store.db import Store


def import_from_host(store: Store, host: str, target: Target,
                     agents: Iterable[str] | None = None, *, dry_run: bool = False,
                     cancel: CancelFlag | None = None) -> ImportReport:
    """Import the sessions of ``agents`` (default: all) stored on ``target``; new chats are on
    ``host``. HostError (one line) when the host cannot be read, Cancelled when ``cancel``
    was set (ssh killed, nothing imported)."""
    chosen = list(agents) if agents is not None else list(IMPORTERS)
    folder = tempfile.mkdtemp(prefix="tolaria-import-")  # 0700
    try:
        fetched = fetch_sessions(target, chosen, folder, cancel=cancel)
        base = Path(folder)
        report = import_sessions(store, base, chosen, dry_run=dry_run, host=host,
                                 source=lambda path: str(_there(host, fetched.home, path, base)))
        report.skipped = [(_there(host, fetched.home, path, base), why)
                          for path, why in report.skipped]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for rel, size in fetched.left_out:
        report.skipped.append((Path(f"{host}:{fetched.home}/{rel}"),
                               f"{size >> 20} MB: over the limits of an import from a host"))
    return report


def _there(host: str, home: str, path: Path, base: Path) -> Path:
    """A fetched file's path as the host names it (not the removed private folder's)."""
    try:
        return Path(f"{host}:{home}/{path.relative_to(base).as_posix()}")
    except ValueError:
        return path
