"""User settings: ``settings.toml`` in the config folder, read once at startup.

A broken file never stops the app: the defaults are used and the problems are returned so the
window can show them. Writes are atomic (a temp file in the same folder, then rename), so a crash
mid-write leaves the old file intact.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import tomli_w

from tolaria import paths

FILENAME = "settings.toml"
DEFAULT_STOP = "Esc"
DEFAULT_STOP_ALL = "Shift+Esc"
DEFAULT_RESTART = "Ctrl+R"
DEFAULT_WATCHDOG_S = 60.0
DEFAULT_RETRY_LIMIT_S = 60.0


@dataclass(frozen=True)
class Settings:
    #: Key sequence (Qt's portable text form, e.g. "Esc", "Ctrl+.") that stops the current chat.
    stop_shortcut: str = DEFAULT_STOP
    #: Key sequence that stops every running chat.
    stop_all_shortcut: str = DEFAULT_STOP_ALL
    #: Seconds without any output from a running turn before the window offers to restart it
    #: (``[behaviour] watchdog_seconds``); it only offers, it never restarts by itself.
    watchdog_seconds: float = DEFAULT_WATCHDOG_S
    #: Seconds a CLI agent may keep retrying an unreachable model before its run is stopped and
    #: reported as an error (``[behaviour] retry_limit_seconds``); 0 never stops it.
    retry_limit_seconds: float = DEFAULT_RETRY_LIMIT_S


def settings_path() -> Path:
    return paths.config_dir() / FILENAME


def load_settings(path: Path | None = None) -> tuple[Settings, list[str]]:
    """The settings and the problems found (each a sentence naming the file and key)."""
    path = path or settings_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Settings(), []
    except OSError as exc:
        return Settings(), [f"{path}: cannot read: {exc.strerror or exc}; using defaults"]
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return Settings(), [f"{path}: not valid TOML ({exc}); using defaults"]
    return _parse(data, path)


def _parse(data: dict[str, Any], path: Path) -> tuple[Settings, list[str]]:
    settings, errors = Settings(), []
    shortcuts = data.get("shortcuts", {})
    if not isinstance(shortcuts, dict):
        return settings, [f"{path}: [shortcuts] must be a table; using defaults"]
    for key, attr in (("stop", "stop_shortcut"), ("stop_all", "stop_all_shortcut")):
        if key not in shortcuts:
            continue
        value = shortcuts[key]
        if isinstance(value, str) and value.strip():
            changes: dict[str, Any] = {attr: value.strip()}
            settings = replace(settings, **changes)
        else:
            errors.append(f"{path}: shortcuts.{key} must be a key sequence such as \"Esc\" "
                          f"or \"Ctrl+.\", got {value!r}; using {getattr(settings, attr)!r}")
    behaviour = data.get("behaviour", {})
    if not isinstance(behaviour, dict):
        errors.append(f"{path}: [behaviour] must be a table; using defaults")
    else:
        if "watchdog_seconds" in behaviour:
            value = behaviour["watchdog_seconds"]
            if _is_number(value) and value > 0:
                settings = replace(settings, watchdog_seconds=float(value))
            else:
                errors.append(f"{path}: behaviour.watchdog_seconds must be a positive number of "
                              f"seconds, got {value!r}; using {settings.watchdog_seconds:g}")
        if "retry_limit_seconds" in behaviour:
            value = behaviour["retry_limit_seconds"]
            if _is_number(value) and 0 <= value < float("inf"):
                settings = replace(settings, retry_limit_seconds=float(value))
            else:
                errors.append(f"{path}: behaviour.retry_limit_seconds must be a number of "
                              f"seconds (0 = never stop a retrying agent), got {value!r}; "
                              f"using {settings.retry_limit_seconds:g}")
    return settings, errors


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def save_settings(settings: Settings, path: Path | None = None) -> None:
    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"shortcuts": {"stop": settings.stop_shortcut, "stop_all": settings.stop_all_shortcut},
            "behaviour": {"watchdog_seconds": settings.watchdog_seconds,
                          "retry_limit_seconds": settings.retry_limit_seconds}}
    fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            tomli_w.dump(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
