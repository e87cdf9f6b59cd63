"""Preferences → Hosts: the page's intents to settings.toml (config/remote_hosts_edit.py), and
the facts back. A write is a small atomic file edit, made at once; the host's agents are looked
at again afterwards (their programs or environment may have changed)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from tolaria.config.remote_hosts_edit import (
    HostConfigError,
    HostEntry,
    read_hosts,
    remove_host,
    save_host,
)
from tolaria.support.tomlfile import SettingsFileError


def _file_problem(exc: SettingsFileError) -> str:
    where = f"{exc.path}, line {exc.line}" if exc.line else str(exc.path)
    return f"Not saved: {where}: {exc.problem}. Fix the file (or move it away) and save again."


class HostsControl(QObject):
    #: The hosts in the file changed (or were read): dict[str, HostEntry], the one to select.
    hosts_changed = Signal(object, object)
    #: A host was written: its name.
    host_saved = Signal(str)
    #: A write was refused; nothing was written: list of (field, message).
    save_failed = Signal(object)

    def __init__(self, path: Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.path = path

    def hosts(self) -> tuple[dict[str, HostEntry], str]:
        """The file's hosts, and a problem reading it ("" when none)."""
        try:
            return read_hosts(self.path), ""
        except SettingsFileError as exc:
            return {}, _file_problem(exc)

    def save(self, entry: HostEntry, replace: str | None) -> None:
        try:
            saved = save_host(entry, replace, self.path)
        except HostConfigError as exc:
            self.save_failed.emit(exc.problems)
            return
        except SettingsFileError as exc:
            self.save_failed.emit([("file", _file_problem(exc))])
            return
        except OSError as exc:
            self.save_failed.emit([("file", f"Not saved: {exc}")])
            return
        self.host_saved.emit(saved.name)
        self.hosts_changed.emit(self.hosts()[0], saved.name)

    def remove(self, name: str) -> None:
        try:
            remove_host(name, self.path)
        except (SettingsFileError, OSError) as exc:
            message = _file_problem(exc) if isinstance(exc, SettingsFileError) else str(exc)
            self.save_failed.emit([("file", message)])
            return
        self.hosts_changed.emit(self.hosts()[0], None)
