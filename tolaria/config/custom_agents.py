"""Custom agents: one manifest file each in the user adapters folder, made from the window.

Validation is the manifest parser's own (:func:`tolaria.core.adapters.manifest.parse_manifest`), mapped
to the form's fields. Files are written atomically; editing an existing file changes only the
keys that changed, so its comments survive. Built-in manifests are never written or removed.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import tomlkit

from tolaria.config.overrides import save_overrides
from tolaria.core.adapters.attach_spec import AttachSpec
from tolaria.core.adapters.manifest import (
    OPENAI_CHAT,
    PROTOCOLS,
    Manifest,
    ManifestError,
    builtin_adapters_dir,
    load_adapters,
    parse_manifest,
)
from tolaria.support import paths, tomlfile

#: The built-in "any command" manifest, when this version ships one: the template's base.
TEMPLATE_ID = "custom-command"
_FIELD_RE = re.compile(r"[A-Za-z_]+")
#: Optional manifest keys an openai-chat agent may have too.
_CHAT_OPTIONAL = {"env", "install_hint", "description"}
_HEADER = ("# A custom agent made in Tolaria's preferences. You may edit this file by hand:\n"
           "# the app keeps your comments when it saves changes. Keys: docs/ADAPTERS.md\n")


def _builtin_data(agent_id: str) -> dict[str, Any] | None:
    path = builtin_adapters_dir() / f"{agent_id}.toml"
    try:
        found = tomlfile.read(path)
    except tomlfile.SettingsFileError:
        return None
    return found[1] if found is not None else None


def _free_id(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def template_manifest(kind: str = "lines") -> dict[str, Any]:
    """A starting point for "Add custom agent": ``kind`` is the protocol.

    Based on the built-in ``custom-command`` manifest when present; the id is one no agent
    uses yet. The command names a placeholder program for the user to replace.
    """
    if kind not in PROTOCOLS:
        raise ValueError(f"unknown protocol {kind!r} (known: {', '.join(PROTOCOLS)})")
    taken = set(load_adapters().manifests)
    ident = _free_id("my-agent", taken)
    if kind == OPENAI_CHAT:
        return {"id": ident, "name": "My model", "protocol": OPENAI_CHAT,
                "base_url": "http://127.0.0.1:11434/v1", "model": "llama3.2",
                "api_key_env": ""}
    data: dict[str, Any] = {"id": ident, "name": "My agent", "protocol": kind,
                            "command": ["my-agent", "--", "{prompt}"],
                            "stop": {"polite": "sigint", "polite_window_ms": 1000}}
    base = _builtin_data(TEMPLATE_ID)
    if base is not None:
        base.pop("description", None)
        base.pop("install_hint", None)
        data = {**base, **data}
    if kind == "acp":
        data["command"] = ["my-acp-agent"]
    return data


def field_of(key: str | None) -> str:
    """The form field of a manifest key: ``command[0]`` -> command, ``stop.polite`` -> stop."""
    if not key:
        return ""
    found = _FIELD_RE.match(key)
    return found.group(0) if found else key


def validate_manifest_fields(data: dict[str, Any], *, taken_ids: set[str] | frozenset[str]
                             = frozenset()) -> list[tuple[str, str]]:
    """Live, per-field problems (field, message) of a custom agent's form; empty = valid.

    Checks the form fields independently (id, name, protocol, command and ``{prompt}``
    placement), then the whole manifest with the parser. ``taken_ids``: ids of other agents.
    """
    found: list[tuple[str, str]] = []
    ident = data.get("id")
    if ident in taken_ids:
        found.append(("id", f"{ident!r} is already used by another agent"))
    command = data.get("command")
    if isinstance(command, list) and all(isinstance(p, str) for p in command):
        prompts = [i for i, p in enumerate(command) if "{prompt}" in p]
        if len(prompts) > 1:
            found.append(("command", "{prompt} may appear only once"))
        elif prompts and "--" in command and prompts[0] < command.index("--"):
            found.append(("command", "{prompt} must come after the \"--\" (everything after it "
                                     "is an argument, never an option)"))
    try:
        parse_manifest(data)
    except ManifestError as exc:
        name = field_of(exc.key)
        if not any(f == name for f, _ in found):
            found.append((name, f"{exc.key}: {exc.reason}" if exc.key != name else exc.reason))
    return found


def _user_file(agent_id: str) -> Path | None:
    """The user adapter file defining ``agent_id`` (even a broken one named after it)."""
    adapters = load_adapters()
    manifest = adapters.manifests.get(agent_id)
    if manifest is not None and not manifest.builtin and manifest.source is not None:
        return manifest.source
    user_dir = paths.user_adapters_dir()
    for err in adapters.errors:
        if err.path and err.path.parent == user_dir and err.path.stem == agent_id:
            return err.path
    return None


def write_custom_agent(data: dict[str, Any], *, replace_id: str | None = None) -> Path:
    """Write a custom agent's manifest to the user adapters folder; its path.

    ``replace_id``: the agent being edited (its file is updated, or renamed when the id
    changed). Raises ManifestError for an invalid manifest, a new id that is taken, or a
    built-in's id (customise a built-in with its overrides, or duplicate it).
    """
    ident = data.get("id")
    # Errors name the file the agent would be written to.
    named = paths.user_adapters_dir() / (f"{ident}.toml" if isinstance(ident, str) and ident
                                         else "<id>.toml")
    manifest = parse_manifest(data, named)
    adapters = load_adapters()
    existing = adapters.manifests.get(manifest.id)
    old_file = _user_file(replace_id) if replace_id else None
    if manifest.id != replace_id and existing is not None:
        kind = "a built-in agent" if existing.builtin else "another agent"
        raise ManifestError(named, "id", f"{manifest.id!r} is already used by {kind}; choose "
                                         "another id")
    target = old_file if old_file is not None and manifest.id == replace_id else (
        paths.user_adapters_dir() / f"{manifest.id}.toml")
    if manifest.id != replace_id and target.exists():
        raise ManifestError(target, "id", "a file with this name already exists in the "
                                          "adapters folder; choose another id")
    if target.exists():
        tomlfile.edit(target, _replace_all(data))
    else:
        text = _HEADER + tomlkit.dumps(data)
        parse_manifest(tomllib.loads(text), target)  # what is written is exactly what loads
        tomlfile.write_atomic(target, text)
    if old_file is not None and old_file != target:
        old_file.unlink(missing_ok=True)
    return target


def _replace_all(data: dict[str, Any]) -> tomlfile.Change:
    """An edit that makes a manifest file hold exactly ``data``, touching only what differs."""

    def change(root: Any, new_table: tomlfile.TableFactory) -> bool:
        for key in [k for k in root if k not in data]:
            del root[key]
        for key, value in data.items():
            unwrap = getattr(root.get(key), "unwrap", None)
            if (unwrap() if unwrap is not None else root.get(key)) != value:
                root[key] = value
        return True

    return change


def manifest_data(manifest: Manifest) -> dict[str, Any]:
    """The TOML data of a manifest: its file's when it has one, else rebuilt from its fields."""
    if manifest.source is not None:
        try:
            found = tomlfile.read(manifest.source)  # regular files only, size-capped
        except tomlfile.SettingsFileError:
            found = None
        if found is not None:
            return found[1]
    data: dict[str, Any] = {"id": manifest.id, "name": manifest.name,
                            "protocol": manifest.protocol}
    if manifest.protocol == OPENAI_CHAT:
        data.update(base_url=manifest.base_url, model=manifest.model,
                    api_key_env=manifest.api_key_env, max_iterations=manifest.max_iterations)
    else:
        data["command"] = list(manifest.command)
    optional: dict[str, Any] = {
        "version_command": manifest.version_command, "env": manifest.env,
        "install_hint": manifest.install_hint, "description": manifest.description,
        "resume": manifest.resume, "resume_command": manifest.resume_command,
        "model_args": manifest.model_args,
        "permission_args": {k: list(v) for k, v in manifest.permission_args.items()},
        "permission_env": manifest.permission_env,
    }
    for key, value in optional.items():
        if value and (manifest.protocol != OPENAI_CHAT or key in _CHAT_OPTIONAL):
            data[key] = list(value) if isinstance(value, tuple) else value
    if manifest.protocol != OPENAI_CHAT:
        data["permissions"] = manifest.permissions
    if manifest.input != "text":
        data["input"] = manifest.input
    if manifest.protocol != OPENAI_CHAT and manifest.mcp.takes_servers:  # ADR 0019
        data["mcp"] = {"form": manifest.mcp.form, "transports": list(manifest.mcp.transports)}
        if manifest.mcp.settings_env:
            data["mcp"]["settings_env"] = manifest.mcp.settings_env
        if manifest.mcp.home_env:
            data["mcp"]["home_env"] = manifest.mcp.home_env
    spec = manifest.attachments  # ADR 0028
    if spec != AttachSpec():
        table: dict[str, Any] = {"images": spec.images, "files": spec.files}
        for key in ("image_args", "file_args", "include_args"):
            if getattr(spec, key):
                table[key] = list(getattr(spec, key))
        if spec.note:
            table["note"] = spec.note
        data["attachments"] = table
    data["stop"] = {"polite": manifest.stop.polite,
                    "polite_window_ms": manifest.stop.polite_window_ms}
    return data


def duplicate_agent(manifest: Manifest, new_id: str, new_name: str) -> Path:
    """A custom copy of ``manifest`` under a new id and name (comments of its file kept)."""
    data = manifest_data(manifest)
    data.update(id=new_id, name=new_name)
    if manifest.source is not None and manifest.source.is_file():
        # Copy the file's text and change two keys, so its comments come along.
        target = paths.user_adapters_dir() / f"{new_id}.toml"
        parse_manifest(data, target)
        taken = load_adapters().manifests
        if new_id in taken:
            raise ManifestError(target, "id", f"{new_id!r} is already used by another agent")
        if target.exists():
            raise ManifestError(target, "id", "a file with this name already exists")
        found = tomlfile.read(manifest.source)  # SettingsFileError (a ValueError) if hostile
        if found is None:
            raise ManifestError(manifest.source, None, "the file disappeared")
        source_text, source_data = found
        text = tomlfile.edited_text(source_text, source_data, target,
                                    _replace_all(data)) or source_text
        parse_manifest(tomllib.loads(text), target)
        tomlfile.write_atomic(target, text)
        return target
    return write_custom_agent(data)


def remove_custom_agent(agent_id: str) -> None:
    """Delete a custom agent's file and its settings. A built-in cannot be removed (disable
    it, or reset it); a user file that replaces a built-in is removed (the built-in returns)."""
    path = _user_file(agent_id)
    if path is None:
        manifest = load_adapters().manifests.get(agent_id)
        if manifest is not None and manifest.builtin:
            raise ValueError(f"{manifest.name} ({agent_id}) is a built-in agent and cannot be "
                             "removed; disable it instead")
        raise ValueError(f"no custom agent {agent_id!r} in {paths.user_adapters_dir()}")
    save_overrides(agent_id, None)  # first: a broken settings file stops it before any change
    path.unlink()


def reset_builtin(agent_id: str) -> None:
    """Back to the shipped defaults: drops the agent's ``[agents.<id>]`` overrides and deletes a
    user adapter file that replaces the built-in manifest of the same id."""
    if _builtin_data(agent_id) is None and not any(
            m.builtin for m in load_adapters().manifests.values() if m.id == agent_id):
        raise ValueError(f"{agent_id!r} is not a built-in agent (remove it instead)")
    save_overrides(agent_id, None)
    shadow = _user_file(agent_id)
    if shadow is not None:
        shadow.unlink()
