"""User settings: ``settings.toml`` in the config folder (``$TOLARIA_HOME`` when set).

The file stays hand-editable: ``[shortcuts]``, ``[behaviour]`` and one ``[agents.<id>]`` table per
agent (tolaria/config/agents.py). A broken file never stops the app: the defaults are used and
the problems are returned (file, line, key, problem) so the window can show them. Saving edits
only the keys that changed in the existing document, so comments and hand-edits survive, and
writes atomically; a file that does not parse is never written over (SettingsFileError).
"""

from __future__ import annotations

import math
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from tolaria.core.attachments.model import DEFAULT_MAX_CHAT, DEFAULT_MAX_FILE, MB, AttachLimits
from tolaria.core.limits import RunLimits, positive_or_none
from tolaria.support import paths, tomlfile
from tolaria.support.tomlfile import SettingsFileError

__all__ = [
    "DEFAULT_RESTART", "DEFAULT_STOP", "DEFAULT_STOP_ALL", "DEFAULT_WATCHDOG_S", "FILENAME",
    "SEND_KEYS", "THEMES", "Settings", "SettingsFileError", "SettingsValueError", "load_settings",
    "save_settings", "settings_path", "shortcut_conflicts", "validate_settings",
]

FILENAME = "settings.toml"
DEFAULT_STOP = "Esc"
DEFAULT_STOP_ALL = "Shift+Esc"
DEFAULT_SEND = "Enter"
DEFAULT_NEW_CHAT = "Ctrl+N"
DEFAULT_RESTART = "Ctrl+R"
DEFAULT_PREFERENCES = "Ctrl+,"
DEFAULT_WATCHDOG_S = 60.0
DEFAULT_STALL_MIN = 5.0
DEFAULT_GRACE_S = 2.0
DEFAULT_RETRY_LIMIT_S = 60.0
#: The two choices for sending a message; the other one inserts a newline.
SEND_KEYS = ("Enter", "Ctrl+Enter")
MAX_GRACE_S = 60.0
MAX_POLITE_WINDOW_MS = 60_000
#: Values of ``[appearance] theme`` (tolaria/ui/theme.py applies them).
THEMES = ("system", "light", "dark")
#: Values of ``[behaviour] process_backend`` (tolaria/core/process/backend.py CHOICES).
PROCESS_BACKENDS = ("auto", "linux", "portable")


@dataclass(frozen=True)
class Settings:
    #: Key sequence (Qt's portable text form, e.g. "Esc", "Ctrl+.") that stops the current chat.
    stop_shortcut: str = DEFAULT_STOP
    #: Key sequence that stops every running chat.
    stop_all_shortcut: str = DEFAULT_STOP_ALL
    #: "Enter" or "Ctrl+Enter" sends the message; the other one inserts a newline.
    send_shortcut: str = DEFAULT_SEND
    #: Key sequence that opens a new chat.
    new_chat_shortcut: str = DEFAULT_NEW_CHAT
    #: Seconds without any output from a running turn before the window offers to restart it
    #: (``[behaviour] watchdog_seconds``); it only offers, it never restarts by itself.
    watchdog_seconds: float = DEFAULT_WATCHDOG_S
    #: Seconds between SIGTERM and SIGKILL when a run's process tree is stopped.
    grace_seconds: float = DEFAULT_GRACE_S
    #: When set, replaces every manifest's ``stop.polite_window_ms`` (how long the polite stop
    #: request may take before the tree kill).
    polite_window_ms: int | None = None
    #: Ask before quitting while runs are active.
    confirm_quit: bool = True
    #: Desktop notifications at all (``[behaviour] notify_background``): about chats not in
    #: view; each kind has its own switch below (``[notifications]``, ADR 0030).
    notify_background: bool = True
    #: A background chat finished (or was stopped) ...
    notify_finished: bool = True
    #: ... failed ...
    notify_failed: bool = True
    #: ... an agent asks permission (Allow / Deny from the notification) ...
    notify_permission: bool = True
    #: ... an agent asks the user a question ...
    notify_question: bool = True
    #: ... a run said nothing for ``notify_stall_minutes`` (Stop / Restart) ...
    notify_stall: bool = True
    #: ... and a limit stopped a run.
    notify_limit: bool = True
    #: Minutes without output before a run is notified as stalled.
    notify_stall_minutes: float = DEFAULT_STALL_MIN
    #: How the stop engine talks to the system (``[behaviour] process_backend``): "auto" (linux
    #: where /proc is, portable elsewhere), "linux" or "portable" (docs/adr/0016);
    #: TOLARIA_PROCESS_BACKEND wins over it.
    process_backend: str = "auto"
    #: Seconds a CLI agent may keep retrying an unreachable model before its run is stopped and
    #: reported as an error (``[behaviour] retry_limit_seconds``); 0 never stops it.
    retry_limit_seconds: float = DEFAULT_RETRY_LIMIT_S
    #: The window's colours: "system" (the platform's palette), "light" or "dark"
    #: (``[appearance] theme``); changed live from the View menu.
    theme: str = "system"
    #: Checkpoints (``[checkpoints]``): an untracked file bigger than this many MB is not
    #: snapshotted (it is listed under the turn instead).
    checkpoint_max_file_mb: float = 10.0
    #: At most this many untracked files per snapshot ...
    checkpoint_max_files: int = 5000
    #: ... and at most this many MB of them.
    checkpoint_max_total_mb: float = 50.0
    #: Seconds a snapshot may spend finding untracked files; past it only tracked files are
    #: captured (said under the turn).
    checkpoint_time_budget_seconds: float = 3.0
    #: Limits that stop a run by themselves (``[limits]``; 0 = no limit, a chat's own limits
    #: and ``tolaria run --max-*`` override them): wall time in seconds ...
    limit_time_seconds: float = 0.0
    #: ... cost in US dollars (where the agent reports it) ...
    limit_cost_usd: float = 0.0
    #: ... tokens (input + output, as the agent reports them) ...
    limit_tokens: int = 0
    #: ... and tool calls.
    limit_tool_calls: int = 0
    #: Attachments (``[attachments]``, ADR 0028): MB one attached file may have ...
    attach_max_file_mb: float = DEFAULT_MAX_FILE / MB
    #: ... and MB all attachments of one chat may have together.
    attach_max_chat_mb: float = DEFAULT_MAX_CHAT / MB

    def attach_limits(self) -> AttachLimits:
        """The ``[attachments]`` caps, in bytes."""
        return AttachLimits(int(self.attach_max_file_mb * MB), int(self.attach_max_chat_mb * MB))

    def notify_kinds(self) -> frozenset[str]:
        """The kinds of notification switched on (tolaria/chats/notify/notices.py KINDS)."""
        return frozenset(kind for kind in ("finished", "failed", "permission", "question",
                                           "stall", "limit")
                         if getattr(self, f"notify_{kind}"))

    def run_limits(self) -> RunLimits:
        """The ``[limits]`` defaults of each run."""
        tokens, calls = self.limit_tokens, self.limit_tool_calls
        return RunLimits(positive_or_none(self.limit_time_seconds),
                         positive_or_none(self.limit_cost_usd),
                         tokens if tokens > 0 else None, calls if calls > 0 else None)


class SettingsValueError(ValueError):
    """Values that cannot be saved: ``problems`` holds (field name, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{name}: {message}" for name, message in problems))


# -- the file layout: one row per setting ----------------------------------------------------

def _shortcut(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return 'must be a key sequence such as "Esc" or "Ctrl+."'
    if any(ch in value for ch in "\n\r\t\0"):
        return "must be a key sequence on one line"
    if len(value) > 64:
        return "is too long for a key sequence"
    return None


def _send(value: object) -> str | None:
    if value not in SEND_KEYS:
        return f'must be "Enter" or "Ctrl+Enter" (the other one inserts a newline), got {value!r}'
    return None


def _number(low: float, high: float, what: str, low_open: bool = False) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        ok = (isinstance(value, int | float) and not isinstance(value, bool)
              and math.isfinite(value) and (value > low if low_open else value >= low)
              and value <= high)
        return None if ok else f"must be {what}, got {value!r}"
    return check


def _window(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_POLITE_WINDOW_MS:
        return None
    return (f"must be a whole number of milliseconds from 0 to {MAX_POLITE_WINDOW_MS} "
            f"(or unset to use each agent's own), got {value!r}")


def _backend(value: object) -> str | None:
    if value not in PROCESS_BACKENDS:
        return f'must be one of {", ".join(repr(b) for b in PROCESS_BACKENDS)}, got {value!r}'
    return None


def _theme(value: object) -> str | None:
    if value not in THEMES:
        return f'must be one of {", ".join(repr(t) for t in THEMES)}, got {value!r}'
    return None


def _count(low: int, high: int, what: str) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return None if ok else f"must be {what}, got {value!r}"
    return check


def _flag(value: object) -> str | None:
    return None if isinstance(value, bool) else f"must be true or false, got {value!r}"


@dataclass(frozen=True)
class _Key:
    attr: str
    table: str
    key: str
    check: Callable[[object], str | None]
    #: How a valid file value becomes the attribute value.
    convert: Callable[[Any], Any] = lambda v: v


_KEYS = (
    _Key("stop_shortcut", "shortcuts", "stop", _shortcut, str.strip),
    _Key("stop_all_shortcut", "shortcuts", "stop_all", _shortcut, str.strip),
    _Key("send_shortcut", "shortcuts", "send", _send),
    _Key("new_chat_shortcut", "shortcuts", "new_chat", _shortcut, str.strip),
    _Key("watchdog_seconds", "behaviour", "watchdog_seconds",
         _number(0, 86_400, "a positive number of seconds (at most 86400)", low_open=True), float),
    _Key("grace_seconds", "behaviour", "grace_seconds",
         _number(0, MAX_GRACE_S, f"a number of seconds from 0 to {MAX_GRACE_S:g}"), float),
    _Key("polite_window_ms", "behaviour", "polite_window_ms", _window),
    _Key("confirm_quit", "behaviour", "confirm_quit", _flag),
    _Key("notify_background", "behaviour", "notify_background", _flag),
    _Key("notify_finished", "notifications", "finished", _flag),
    _Key("notify_failed", "notifications", "failed", _flag),
    _Key("notify_permission", "notifications", "permission", _flag),
    _Key("notify_question", "notifications", "question", _flag),
    _Key("notify_stall", "notifications", "stall", _flag),
    _Key("notify_limit", "notifications", "limit", _flag),
    _Key("notify_stall_minutes", "notifications", "stall_minutes",
         _number(0, 1440, "a positive number of minutes (at most 1440)", low_open=True), float),
    _Key("process_backend", "behaviour", "process_backend", _backend),
    _Key("retry_limit_seconds", "behaviour", "retry_limit_seconds",
         _number(0, math.inf, "a number of seconds (0 = never stop a retrying agent)"), float),
    _Key("theme", "appearance", "theme", _theme),
    _Key("checkpoint_max_file_mb", "checkpoints", "max_file_mb",
         _number(0, 1_000_000, "a number of MB (0 or more)"), float),
    _Key("checkpoint_max_files", "checkpoints", "max_files",
         _count(0, 10_000_000, "a whole number of files (0 or more)")),
    _Key("checkpoint_max_total_mb", "checkpoints", "max_total_mb",
         _number(0, 1_000_000, "a number of MB (0 or more)"), float),
    _Key("checkpoint_time_budget_seconds", "checkpoints", "time_budget_seconds",
         _number(0, 3600, "a number of seconds from 0 to 3600"), float),
    _Key("limit_time_seconds", "limits", "max_time_seconds",
         _number(0, 30 * 86_400, "a number of seconds (0 = no time limit)"), float),
    _Key("limit_cost_usd", "limits", "max_cost_usd",
         _number(0, 1_000_000, "a number of US dollars (0 = no cost limit)"), float),
    _Key("limit_tokens", "limits", "max_tokens",
         _count(0, 10**12, "a whole number of tokens (0 = no token limit)")),
    _Key("limit_tool_calls", "limits", "max_tool_calls",
         _count(0, 10**9, "a whole number of tool calls (0 = no limit)")),
    _Key("attach_max_file_mb", "attachments", "max_file_mb",
         _number(0, 4096, "a number of MB from 0 to 4096", low_open=True), float),
    _Key("attach_max_chat_mb", "attachments", "max_chat_mb",
         _number(0, 1_000_000, "a number of MB (more than 0)", low_open=True), float),
)
_TABLES = ("shortcuts", "behaviour", "appearance", "checkpoints", "limits", "notifications",
           "attachments")
#: Top-level tables of settings.toml; anything else is reported (a typo such as [shortcut]
#: would otherwise be ignored without a word). ``agents``: tolaria/config/overrides.py.
KNOWN_TABLES = ("shortcuts", "behaviour", "appearance", "checkpoints", "limits",
                "notifications", "agents", "mcp", "attachments",
                "remote", "hosts")  # remote, hosts: tolaria/config/remote_hosts.py
assert {k.attr for k in _KEYS} == {f.name for f in fields(Settings)}


def settings_path() -> Path:
    return paths.config_dir() / FILENAME


def load_settings(path: Path | None = None) -> tuple[Settings, list[str]]:
    """The settings and the problems found, each "file:line: key: problem; what is used".

    Never raises: a file that cannot be read or parsed gives the defaults and one problem
    naming its line; a bad value gives that setting's default and a problem.
    """
    path = path or settings_path()
    try:
        found = tomlfile.read(path)
    except SettingsFileError as exc:
        return Settings(), [f"{exc}; using the default settings (the file is left as it is "
                            "and is not saved over until it is fixed)"]
    if found is None:
        return Settings(), []
    text, data = found
    return _parse(data, text, path)


def _parse(data: dict[str, Any], text: str, path: Path) -> tuple[Settings, list[str]]:
    values: dict[str, Any] = {}
    problems: list[str] = []
    defaults = Settings()
    for table in sorted(set(data) - set(KNOWN_TABLES)):
        line = tomlfile.table_line(text, table) or tomlfile.key_line(text, "", table)
        problems.append(f"{_where(path, line)}: {table}: unknown table, ignored (known: "
                        f"{', '.join(KNOWN_TABLES)})")
    for table in _TABLES:
        section = data.get(table, {})
        if not isinstance(section, dict):
            problems.append(f"{_where(path, tomlfile.key_line(text, '', table))}: {table}: "
                            f"must be a table ([{table}]); using the default {table}")
            continue
        known = {k.key for k in _KEYS if k.table == table}
        for key in sorted(set(section) - known):
            line = tomlfile.key_line(text, table, key)
            problems.append(f"{_where(path, line)}: {table}.{key}: unknown setting, ignored "
                            f"(known: {', '.join(sorted(known))})")
    for spec in _KEYS:
        section = data.get(spec.table, {})
        if not isinstance(section, dict) or spec.key not in section:
            continue
        value = section[spec.key]
        problem = spec.check(value)
        if problem is None:
            values[spec.attr] = spec.convert(value)
        else:
            line = tomlfile.key_line(text, spec.table, spec.key)
            default = getattr(defaults, spec.attr)
            problems.append(f"{_where(path, line)}: {spec.table}.{spec.key}: {problem}; "
                            f"using {default!r}")
    return replace(defaults, **values), problems


def _where(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line else str(path)


def validate_settings(settings: Settings) -> list[tuple[str, str]]:
    """(field name, message) for each value that cannot be saved; empty when all are valid.

    Shortcut conflicts are reported too (as the field of the later shortcut).
    """
    problems = []
    for spec in _KEYS:
        problem = spec.check(getattr(settings, spec.attr))
        if problem is not None:
            problems.append((spec.attr, problem))
    if not problems:
        problems += [(attr, message) for attr, message in _conflicts(settings)]
    return problems


def save_settings(settings: Settings, path: Path | None = None, *,
                  base: Settings | None = None) -> None:
    """Write ``settings``: only keys whose value changed are edited in the existing file.

    With ``base`` (the settings as loaded), only the fields that differ from it are written, so
    a value edited by hand while the window was open is kept. Raises SettingsValueError for
    invalid values and SettingsFileError when the file on disk is broken; nothing is written
    in either case.
    """
    problems = validate_settings(settings)
    if problems:
        raise SettingsValueError(problems)
    path = path or settings_path()
    found = tomlfile.read(path)
    on_disk, _ = _parse(found[1], "", path) if found else (Settings(), [])
    writes = []
    for spec in _KEYS:
        new = getattr(settings, spec.attr)
        if base is not None and getattr(base, spec.attr) == new:
            continue
        # Unchanged (also: absent and default, or a bad hand-edit the user did not touch).
        if new == getattr(on_disk, spec.attr):
            continue
        writes.append((spec, float(new) if spec.convert is float else new))

    def change(root: Any, new_table: tomlfile.TableFactory) -> bool:
        for spec, value in writes:
            if spec.table not in root:
                root[spec.table] = new_table(root, False)
            section = root[spec.table]
            if not isinstance(section, MutableMapping):
                raise SettingsFileError(path, tomlfile.key_line(found[0] if found else "", "",
                                                                spec.table),
                                        f"{spec.table} must be a table ([{spec.table}]) to save "
                                        "settings into it; fix or remove it")
            if value is None:
                section.pop(spec.key, None)
            else:
                section[spec.key] = value
        return bool(writes)

    tomlfile.edit(path, change)


# -- shortcuts --------------------------------------------------------------------------------

_MODIFIERS = {"ctrl": "ctrl", "control": "ctrl", "shift": "shift", "alt": "alt", "meta": "meta",
              "cmd": "meta", "command": "meta", "super": "meta", "win": "meta", "option": "alt"}
_KEY_ALIASES = {"escape": "esc", "return": "enter", "del": "delete", "ins": "insert",
                "pgup": "pageup", "pgdown": "pagedown"}
_LABELS = {"stop_shortcut": "Stop", "stop_all_shortcut": "Stop all",
           "new_chat_shortcut": "New chat", "send_shortcut": "Send"}


def normalize_shortcut(text: str) -> str:
    """A comparable form of a key sequence: "shift+Esc" and "Shift+Escape" are the same."""
    chords = []
    for chord in text.split(","):
        chord = chord.strip()
        if chord.endswith("++") or chord == "+":
            key, mods = "+", chord[:-2].split("+") if chord.endswith("++") else []
        else:
            parts = chord.split("+")
            key, mods = parts[-1], parts[:-1]
        key = key.strip().lower()
        names = sorted({_MODIFIERS.get(m.strip().lower(), m.strip().lower()) for m in mods if m})
        chords.append("+".join([*names, _KEY_ALIASES.get(key, key)]))
    return ", ".join(c for c in chords if c)


def _conflicts(settings: Settings) -> list[tuple[str, str]]:
    newline_key = SEND_KEYS[1] if settings.send_shortcut == SEND_KEYS[0] else SEND_KEYS[0]
    taken: dict[str, str] = {
        normalize_shortcut(DEFAULT_RESTART): "Restart turn",
        normalize_shortcut(DEFAULT_PREFERENCES): "Preferences",
    }
    found = []
    for attr in ("send_shortcut", "stop_shortcut", "stop_all_shortcut", "new_chat_shortcut"):
        value = getattr(settings, attr)
        key = normalize_shortcut(value)
        label = _LABELS[attr]
        if key in taken:
            found.append((attr, f'{label} and {taken[key]} both use "{value}"'))
        elif attr != "send_shortcut" and key == normalize_shortcut(newline_key):
            found.append((attr, f'{label} uses "{value}", which inserts a newline in the message '
                                f'box while Send is "{settings.send_shortcut}"'))
        else:
            taken[key] = label
    return found


def shortcut_conflicts(settings: Settings) -> list[str]:
    """Human sentences, one per conflict between shortcuts; empty if there is none."""
    return [message for _, message in _conflicts(settings)]
