"""Per-agent settings (``[agents.<id>]`` in ``settings.toml``) and how a run applies them.

The window and ``tolaria run`` share ``prepare_run`` (tolaria/chats/run_config.py), which applies
these overrides with :func:`apply_overrides`. Nothing is skipped silently: overrides that cannot
be applied raise AgentSettingsError with a sentence saying what to change.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tolaria.config.settings import SettingsFileError, settings_path
from tolaria.core.adapters.manifest import OPENAI_CHAT, PERMISSION_MODES, Manifest
from tolaria.support import tomlfile

# Which env values Preferences hides: the one secret policy (the crash reports' and cards' too).
from tolaria.support.redact import is_secret_name as is_secret_name

_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_AGENT_ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_REFERENCE_RE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
MASK = "••••••••"


@dataclass(frozen=True)
class AgentOverrides:
    """What the user changed about one agent; the defaults change nothing."""

    enabled: bool = True
    #: The program to run instead of the manifest's first ``command`` element.
    path: str | None = None
    #: Appended to the command (before its ``--`` when it has one).
    extra_args: tuple[str, ...] = ()
    #: On top of the manifest's ``[env]``; values may reference ``${VAR}``.
    env: Mapping[str, str] = field(default_factory=dict)
    #: Passed through the manifest's ``model_args``, or the ``model`` of an openai-chat agent.
    model: str | None = None
    #: "safe" or "full"; None keeps the manifest's ``permissions``.
    permission_mode: str | None = None
    #: Default working folder of new chats with this agent.
    cwd: str | None = None

    def __repr__(self) -> str:  # env values may be tokens: never in a log line
        env = {k: (mask(v) if is_secret_name(k) else v) for k, v in self.env.items()}
        return (f"AgentOverrides(enabled={self.enabled}, path={self.path!r}, "
                f"extra_args={self.extra_args!r}, env={env!r}, model={self.model!r}, "
                f"permission_mode={self.permission_mode!r}, cwd={self.cwd!r})")

    @property
    def is_default(self) -> bool:
        return self == AgentOverrides()


class AgentSettingsError(ValueError):
    """An agent that cannot be run as configured (disabled, or bad overrides)."""


def mask(value: str) -> str:
    """``value`` as shown in the window: a reference like ``${OPENAI_API_KEY}`` stays readable,
    anything else is hidden (a fixed-length mask: the length is not shown either)."""
    if not value or _REFERENCE_RE.fullmatch(value.strip()):
        return value
    return MASK


def split_args(text: str) -> tuple[str, ...]:
    """Arguments typed on one line, split like a POSIX shell would (quotes group words); no
    shell ever runs them. ValueError with the reason for unbalanced quotes."""
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise ValueError(f"cannot split the arguments: {exc} (close the quote)") from None


def join_args(args: tuple[str, ...] | list[str]) -> str:
    """The inverse of :func:`split_args`, for showing arguments on one line."""
    return shlex.join(args)


# -- validation ---------------------------------------------------------------------------------

def _text(value: object, what: str) -> str | None:
    if not isinstance(value, str):
        return f"must be {what}, got {type(value).__name__}"
    if not value.strip():
        return f"must be {what}, not empty"
    if "\0" in value or "\n" in value:
        return "must be on one line"
    return None


def _field_problems(o: AgentOverrides) -> list[tuple[str, str]]:
    """Format problems only (no file-system checks): used when loading."""
    found: list[tuple[str, str]] = []
    if not isinstance(o.enabled, bool):
        found.append(("enabled", f"must be true or false, got {o.enabled!r}"))
    if o.path is not None and (p := _text(o.path, "a program name or path")):
        found.append(("path", p))
    if not isinstance(o.extra_args, tuple | list) or not all(
            isinstance(a, str) for a in o.extra_args):
        found.append(("extra_args", "must be a list of strings (arguments, never a shell line)"))
    else:
        for arg in o.extra_args:
            if "{prompt}" in arg or "{session_id}" in arg:
                found.append(("extra_args", f"{arg!r}: must not contain {{prompt}} or "
                                            "{session_id} (the command already places them)"))
            elif "\0" in arg:
                found.append(("extra_args", "must not contain NUL characters"))
    if not isinstance(o.env, Mapping):
        found.append(("env", 'must be a table of NAME = "value"'))
    else:
        for name, value in o.env.items():
            if not isinstance(name, str) or _ENV_NAME_RE.fullmatch(name) is None:
                found.append(("env", f"{name!r} is not a valid environment variable name "
                                     "(letters, digits and _, not starting with a digit)"))
            elif not isinstance(value, str):
                found.append(("env", f"{name}: must be a string, got {type(value).__name__}"))
            elif "\0" in value:
                found.append(("env", f"{name}: must not contain NUL characters"))
    if o.model is not None:
        if p := _text(o.model, "a model name"):
            found.append(("model", p))
        elif "{" in o.model or "}" in o.model or o.model.startswith("-"):
            found.append(("model", f"{o.model!r} is not a model name (no braces, and it "
                                   "must not start with '-')"))
    if o.permission_mode is not None and o.permission_mode not in PERMISSION_MODES:
        found.append(("permission_mode", f"must be one of {', '.join(PERMISSION_MODES)}, "
                                         f"got {o.permission_mode!r}"))
    if o.cwd is not None and (p := _text(o.cwd, "a folder")):
        found.append(("cwd", p))
    return found


def validate_overrides(o: AgentOverrides, manifest: Manifest | None = None
                       ) -> list[tuple[str, str]]:
    """(field, message) for each value that cannot be used; empty when all are valid.

    Checks the program path and folder exist; with ``manifest``, also that the agent can take
    each override (a model needs ``model_args``; an openai-chat agent has no program).
    """
    found = _field_problems(o)
    bad = {name for name, _ in found}
    if o.path is not None and "path" not in bad:
        program = os.path.expanduser(o.path)
        if os.sep in program or (os.altsep and os.altsep in program):
            if not os.path.isfile(program):
                found.append(("path", f"{program}: no such file"))
            elif not os.access(program, os.X_OK):
                found.append(("path", f"{program}: not executable (chmod +x it)"))
    if o.cwd is not None and "cwd" not in bad and not os.path.isdir(os.path.expanduser(o.cwd)):
        found.append(("cwd", f"{o.cwd}: no such folder"))
    if manifest is not None:
        found += _manifest_problems(o, manifest, bad)
    return found


def _manifest_problems(o: AgentOverrides, m: Manifest, bad: set[str]) -> list[tuple[str, str]]:
    found = []
    if m.protocol == OPENAI_CHAT:
        if o.path is not None:
            found.append(("path", f"{m.name} is a model endpoint, not a program: no path"))
        if o.extra_args:
            found.append(("extra_args", f"{m.name} is a model endpoint: no arguments"))
    elif o.model is not None and "model" not in bad and not m.model_args:
        found.append(("model", f"{m.name} has no model_args in its manifest, so Tolaria cannot "
                               "tell it which model to use; clear the model or add model_args"))
    return found


# -- applying -----------------------------------------------------------------------------------

def _insert(template: tuple[str, ...], added: tuple[str, ...]) -> tuple[str, ...]:
    """``added`` before the template's end-of-options ``--``, else at the end."""
    if not added:
        return template
    if "--" in template:
        cut = template.index("--")
        return template[:cut] + added + template[cut:]
    return template + added


def apply_overrides(manifest: Manifest, o: AgentOverrides) -> Manifest:
    """The manifest a run uses: program path, extra arguments, model, environment, permission
    mode. Raises AgentSettingsError when an override cannot be applied (never ignored)."""
    problems = _field_problems(o) + _manifest_problems(o, manifest, set())
    if problems:
        raise AgentSettingsError(f"agent {manifest.id}: " + "; ".join(
            f"{name}: {message}" for name, message in problems))
    changes: dict[str, Any] = {}
    if o.env:
        changes["env"] = {**manifest.env, **o.env}
    if o.permission_mode is not None:
        changes["permissions"] = o.permission_mode
    if manifest.protocol == OPENAI_CHAT:
        if o.model is not None:
            changes["model"] = o.model
        return dataclasses.replace(manifest, **changes) if changes else manifest
    added = tuple(o.extra_args)
    if o.model is not None:
        added = tuple(p.replace("{model}", o.model) for p in manifest.model_args) + added
    old_program = manifest.command[0]
    program = os.path.expanduser(o.path) if o.path is not None else old_program
    # Every argv template that starts the same program gets the same changes.
    for name in ("command", "resume_command"):
        template = getattr(manifest, name, ())
        if template:
            if template[0] == old_program:
                template = (program, *template[1:])
            changes[name] = _insert(tuple(template), added)
    if manifest.version_command and manifest.version_command[0] == old_program:
        changes["version_command"] = (program, *manifest.version_command[1:])
    return dataclasses.replace(manifest, **changes)


# -- storage ------------------------------------------------------------------------------------

_FIELDS = ("enabled", "path", "extra_args", "env", "model", "permission_mode", "cwd")


def _from_table(agent_id: str, table: object, path: Path, text: str
                ) -> tuple[AgentOverrides, list[str]]:
    header = (tomlfile.table_line(text, f"agents.{agent_id}")
              or tomlfile.key_line(text, "agents", agent_id))

    def where(key: str | None = None) -> str:
        line = (tomlfile.key_line(text, f"agents.{agent_id}", key) if key else None) or header
        return f"{path}:{line}" if line else str(path)

    if not isinstance(table, dict):
        return AgentOverrides(), [f"{where()}: agents.{agent_id}: must be a table "
                                  f"([agents.{agent_id}]); ignored"]
    problems = []
    for key in sorted(set(table) - set(_FIELDS)):
        problems.append(f"{where(key)}: agents.{agent_id}.{key}: unknown key, ignored "
                        f"(known: {', '.join(_FIELDS)})")
    values = {k: table[k] for k in _FIELDS if k in table}
    if isinstance(values.get("extra_args"), list):
        values["extra_args"] = tuple(values["extra_args"])
    if isinstance(values.get("env"), dict):
        values["env"] = dict(values["env"])
    candidate = AgentOverrides(**values)
    bad: dict[str, str] = {}
    for name, message in _field_problems(candidate):
        bad.setdefault(name, message)
    for name, message in bad.items():
        problems.append(f"{where(name)}: agents.{agent_id}.{name}: {message}; "
                        f"using the agent's default")
    if bad:
        candidate = dataclasses.replace(
            candidate, **{name: getattr(AgentOverrides(), name) for name in bad})
    return candidate, problems


def read_overrides(path: Path) -> tuple[dict[str, AgentOverrides], list[str], dict[str, list[str]]]:
    """Every ``[agents.<id>]`` table, every problem found, and the problems of each agent."""
    try:
        found = tomlfile.read(path)
    except SettingsFileError as exc:
        return {}, [f"{exc}; agent settings not applied (the file is left as it is)"], {}
    if found is None:
        return {}, [], {}
    text, data = found
    agents = data.get("agents", {})
    if not isinstance(agents, dict):
        return {}, [f"{path}: agents: must be a table ([agents.<id>]); ignored"], {}
    result: dict[str, AgentOverrides] = {}
    problems: list[str] = []
    by_agent: dict[str, list[str]] = {}
    for agent_id, table in agents.items():
        overrides, found_problems = _from_table(agent_id, table, path, text)
        result[agent_id] = overrides
        problems += found_problems
        if found_problems:
            by_agent[agent_id] = found_problems
    return result, problems, by_agent


def load_overrides(path: Path | None = None) -> tuple[dict[str, AgentOverrides], list[str]]:
    """Every ``[agents.<id>]`` table, and the problems found (file:line: key: problem)."""
    result, problems, _ = read_overrides(path or settings_path())
    return result, problems


def _to_toml(o: AgentOverrides, key: str) -> Any:
    value = getattr(o, key)
    if key == "extra_args":
        return list(value)
    if key == "env":
        return dict(value)
    return value


def save_overrides(agent_id: str, overrides: AgentOverrides | None,
                   path: Path | None = None) -> None:
    """Write one agent's table; None (or all defaults) removes it. Only changed keys are
    edited, atomically. Raises AgentSettingsError for invalid values (nothing written) and
    SettingsFileError when the file on disk is broken."""
    if _AGENT_ID_RE.fullmatch(agent_id) is None:
        raise AgentSettingsError(f"{agent_id!r} is not an agent id")
    if overrides is not None:
        problems = _field_problems(overrides)
        if problems:
            raise AgentSettingsError("; ".join(f"{n}: {m}" for n, m in problems))
    path = path or settings_path()
    reset = overrides is None or overrides.is_default

    def change(root: Any, new_table: tomlfile.TableFactory) -> bool:
        agents = root.get("agents")
        if agents is not None and not isinstance(agents, MutableMapping):
            raise SettingsFileError(path, None, "agents must be a table ([agents.<id>]) to save "
                                                "agent settings into it; fix or remove it")
        if reset:
            if agents is None or agent_id not in agents:
                return False
            del agents[agent_id]
            if not agents:
                del root["agents"]
            return True
        assert overrides is not None
        if agents is None:
            root["agents"] = new_table(root, True)
            agents = root["agents"]
        if not isinstance(agents.get(agent_id), MutableMapping):
            agents[agent_id] = new_table(agents, False)
        _edit_table(agents[agent_id], overrides, new_table)
        return True

    tomlfile.edit(path, change)


def _edit_table(table: Any, o: AgentOverrides, new_table: tomlfile.TableFactory) -> None:
    """Set the keys that differ from the file, remove those back at their default; unknown
    keys of the table stay."""
    default = AgentOverrides()
    for key in _FIELDS:
        new = _to_toml(o, key)
        if getattr(o, key) == getattr(default, key):
            table.pop(key, None)
        elif key == "env":
            if not isinstance(table.get("env"), MutableMapping):
                table["env"] = new_table(table, False)
            env = table["env"]
            for name in [n for n in env if n not in new]:
                del env[name]
            for name, value in new.items():
                if env.get(name) != value:
                    env[name] = value
        elif not (key in table and _same(table[key], new)):
            table[key] = new


def _same(current: Any, new: Any) -> bool:
    unwrap = getattr(current, "unwrap", None)
    return bool((unwrap() if unwrap else current) == new)
