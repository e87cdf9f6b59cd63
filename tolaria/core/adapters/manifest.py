"""Adapter manifests: one TOML file per agent CLI, data not code.

Built-in manifests ship in ``adapters/``; user manifests live in ``<config>/adapters/*.toml``
(``$TOLARIA_HOME/adapters`` when set) and override a built-in of the same id. A broken manifest
is reported with its file, key and reason while the others still load.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tolaria.core.adapters.attach_spec import AttachSpec, parse_attach_spec
from tolaria.core.adapters.mcp_spec import McpSpec, parse_mcp_spec
from tolaria.core.mcp.servers import TRANSPORTS
from tolaria.support import paths, tomlfile

#: ``openai-chat`` is not a CLI: Tolaria itself talks to an OpenAI-compatible endpoint
#: (tolaria/core/modelchat/client.py), so it has ``base_url``/``model`` instead of a ``command``.
OPENAI_CHAT = "openai-chat"
#: ``acp`` agents speak the Agent Client Protocol (JSON-RPC on stdio; tolaria/core/turns/acp/turn.py).
ACP = "acp"
#: Protocols parsed by a runtime (tolaria/core/runtimes/), plus the two Tolaria drives itself.
PROTOCOLS = ("lines", "claude-stream-json", "qwen-stream-json", "codex-exec-json",
             "gemini-stream-json", "opencode-json", "cursor-stream-json", "pi-json",
             OPENAI_CHAT, ACP)
#: What the agent may do unattended. "safe": read and edit files, no shell; "full": shell too.
#: A CLI gets its own flags for the mode from ``[permission_args]`` (and variables from
#: ``[permission_env]``). "safe" asks the user (in the chat) before an ``acp`` agent's tool runs
#: (``session/request_permission``) and before each ``run_command`` of an ``openai-chat`` model;
#: with no one to ask (headless runs) it does not allow. "full" allows without asking.
#: See docs/ADAPTERS.md.
PERMISSION_MODES = ("safe", "full")
POLITE_STOPS = ("none", "sigint", "sigterm", "interrupt")
#: How the prompt reaches the agent. "text": as the ``{prompt}`` argument, or raw on stdin when
#: the command has none. "claude-stream-json": one stream-json user message on stdin, which keeps
#: stdin open for the in-band ``interrupt`` stop (tolaria/core/turns/stream_input.py, ADR 0007).
INPUT_MODES = ("text", "claude-stream-json")
CLAUDE_STREAM_INPUT = "claude-stream-json"
_ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_PLACEHOLDER_RE = re.compile(r"\{(prompt|cwd|python|session_id)\}")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KNOWN_KEYS = {
    "id", "name", "protocol", "command", "env", "version_command", "install_hint",
    "description", "stop", "resume", "input",
}
_CHAT_KEYS = {"base_url", "model", "api_key_env", "max_iterations", "permissions"}
#: Keys of every protocol that spawns the agent (all but openai-chat).
_PROCESS_KEYS = {"permissions", "permission_args", "permission_env", "resume_command"}
_STOP_KEYS = {"polite", "polite_window_ms"}
#: ``model_args``: how a CLI is told which model to use (an argv fragment with ``{model}``).
_KNOWN_KEYS |= {"model_args"}
#: ``mcp``: in which form the agent takes Tolaria's MCP servers (mcp_spec.py, ADR 0019).
_PROCESS_KEYS |= {"mcp"}
#: ``attachments``: in which form the agent takes images and files (attach_spec.py, ADR 0028).
_KNOWN_KEYS |= {"attachments"}


class ManifestError(ValueError):
    """A manifest that cannot be used: names the file, the key and the reason."""

    def __init__(self, path: Path | None, key: str | None, reason: str) -> None:
        self.path = path
        self.key = key
        self.reason = reason
        where = str(path) if path else "<manifest>"
        super().__init__(f"{where}: {key}: {reason}" if key else f"{where}: {reason}")


@dataclass(frozen=True)
class StopPolicy:
    #: How to ask the agent to stop before the tree kill: a signal to the agent's own pid, or
    #: "interrupt" (a stream-json control request on its stdin; needs that input mode).
    polite: str = "none"
    #: How long the polite request may take before the tree is killed anyway.
    polite_window_ms: int = 1000


@dataclass(frozen=True)
class Manifest:
    id: str
    name: str
    protocol: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    version_command: tuple[str, ...] | None = None
    install_hint: str = ""
    description: str = ""
    stop: StopPolicy = field(default_factory=StopPolicy)
    #: Arguments appended to ``command`` to continue the agent's own session
    #: (``{session_id}`` is filled in); empty when the agent cannot resume.
    resume: tuple[str, ...] = ()
    #: Arguments that choose the model, with ``{model}`` (e.g. ``["--model", "{model}"]``);
    #: empty when the CLI cannot be told (protocol ``openai-chat`` has ``model`` instead).
    model_args: tuple[str, ...] = ()
    source: Path | None = None
    builtin: bool = False
    #: protocol ``openai-chat`` only: endpoint, model, the environment variable holding the API
    #: key (never the key itself), and the tool rounds allowed per turn.
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    max_iterations: int = 8
    #: The default permission mode (one of PERMISSION_MODES); a run may ask for another.
    permissions: str = "safe"
    #: One of INPUT_MODES.
    input: str = "text"
    #: Per mode, arguments added to the command (before its ``--`` if it has one, else at
    #: the end) and environment variables set for the run.
    permission_args: dict[str, tuple[str, ...]] = field(default_factory=dict)
    permission_env: dict[str, dict[str, str]] = field(default_factory=dict)
    #: A whole argv template (with ``{session_id}`` and ``{prompt}``) used *instead of*
    #: ``command`` to continue a session, for CLIs whose resume is a subcommand
    #: (``codex exec resume ID PROMPT``). Exclusive with ``resume``.
    resume_command: tuple[str, ...] = ()
    #: How MCP servers reach this agent at run time (``[mcp]``; none without the table).
    mcp: McpSpec = field(default_factory=McpSpec)
    #: How images and files reach this agent (``[attachments]``; none: no images, files as paths).
    attachments: AttachSpec = field(default_factory=AttachSpec)

    @property
    def can_resume(self) -> bool:
        """Whether a follow-up can continue the agent's own session (``resume`` or
        ``resume_command``) instead of sending the history along."""
        return bool(self.resume or self.resume_command)

    @property
    def takes_prompt_on_stdin(self) -> bool:
        return not any("{prompt}" in part for part in self.command)


def substitute(template: tuple[str, ...], *, prompt: str = "", cwd: str = "",
               session_id: str = "") -> list[str]:
    """Fill ``{prompt}``, ``{cwd}`` and ``{python}`` into an argv template.

    Each template element stays exactly one argument: the prompt is never split or passed
    through a shell, whatever characters it holds.
    """
    values = {"prompt": prompt, "cwd": cwd, "python": sys.executable, "session_id": session_id}
    # One pass, so a prompt that itself contains "{cwd}" is left exactly as typed.
    return [no_nul(_PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], part)) for part in template]


def no_nul(text: str) -> str:
    """``text`` fit for argv or the environment: NUL ends a C string, so the kernel cannot take
    it (Python raises "embedded null byte"). An agent may print NUL, and its answer comes back
    in the next turn's history: each NUL becomes U+FFFD, the replacement character."""
    return text.replace("\0", "\ufffd") if "\0" in text else text


def parse_manifest(data: dict[str, Any], path: Path | None = None, builtin: bool = False) -> Manifest:
    def fail(key: str | None, reason: str) -> ManifestError:
        return ManifestError(path, key, reason)

    known = (_KNOWN_KEYS | _CHAT_KEYS if data.get("protocol") == OPENAI_CHAT
             else _KNOWN_KEYS | _PROCESS_KEYS)
    unknown = sorted(set(data) - known)
    if unknown:
        raise fail(unknown[0], f"unknown key (known keys: {', '.join(sorted(known))})")
    ident = data.get("id")
    if not isinstance(ident, str) or _ID_RE.fullmatch(ident) is None:
        raise fail("id", f"must be 1-64 characters of a-z, 0-9 and '-', got {ident!r}")
    name = data.get("name", ident)
    if not isinstance(name, str) or not name.strip():
        raise fail("name", "must be a non-empty string")
    protocol = data.get("protocol")
    if protocol not in PROTOCOLS:
        raise fail("protocol", f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    extra: dict[str, Any] = {}
    if protocol == OPENAI_CHAT:
        extra = _chat_keys(data, fail)
        command: tuple[str, ...] = ()
    else:
        command = _argv(data.get("command"), "command", fail)
        extra = _permission_keys(data, fail)
        if "mcp" in data:
            extra["mcp"] = parse_mcp_spec(data["mcp"], fail)
        elif protocol == ACP:  # the protocol itself carries them (session/new mcpServers)
            extra["mcp"] = parse_mcp_spec({"form": "acp", "transports": list(TRANSPORTS)}, fail)
    if protocol == OPENAI_CHAT:
        permissions = data.get("permissions", "safe")
        if permissions not in PERMISSION_MODES:
            raise fail("permissions", f"must be one of {', '.join(PERMISSION_MODES)}, "
                                      f"got {permissions!r}")
        extra["permissions"] = permissions
    if "attachments" in data:
        extra["attachments"] = parse_attach_spec(data["attachments"], fail)
    elif protocol in (ACP, OPENAI_CHAT):  # the protocol itself carries them
        form = "acp" if protocol == ACP else "openai"
        extra["attachments"] = parse_attach_spec(
            {"images": form, "files": "acp" if protocol == ACP else "inline"}, fail)
    version_command = None
    if "version_command" in data:
        version_command = _argv(data["version_command"], "version_command", fail)
    env = _env_table(data.get("env", {}), "env", fail)
    stop = _stop_policy(data.get("stop", {}), fail)
    extra["input"] = _input_mode(data, protocol, command, stop, fail)
    resume: tuple[str, ...] = ()
    if "resume" in data:
        resume = _argv(data["resume"], "resume", fail)
        if not any("{session_id}" in part for part in resume):
            raise fail("resume", "must contain {session_id}")
        if any("{prompt}" in part for part in resume):
            raise fail("resume", "must not contain {prompt} (use resume_command for that)")
    if "resume_command" in data:
        if "resume" in data:
            raise fail("resume_command", "use either resume (arguments appended to command) "
                                         "or resume_command (a whole command), not both")
        extra["resume_command"] = _resume_command(data["resume_command"], command, fail)
    for key in ("install_hint", "description"):
        if not isinstance(data.get(key, ""), str):
            raise fail(key, "must be a string")
    return Manifest(
        id=ident,
        name=name,
        protocol=protocol,
        command=command,
        env=dict(env),
        version_command=version_command,
        install_hint=data.get("install_hint", ""),
        description=data.get("description", ""),
        stop=stop,
        resume=resume,
        model_args=_model_args(data, protocol, fail),
        source=path,
        builtin=builtin,
        **extra,
    )


def _chat_keys(data: dict[str, Any], fail: Any) -> dict[str, Any]:
    for key in ("command", "version_command", "resume"):
        if key in data:
            raise fail(key, "not used by protocol openai-chat (it has base_url and model)")
    base_url = data.get("base_url")
    if not isinstance(base_url, str) or not re.match(r"https?://[^\s/]+", base_url):
        raise fail("base_url", f"must be an http:// or https:// URL, got {base_url!r}")
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise fail("model", "must be a non-empty string")
    key_env = data.get("api_key_env", "")
    if not isinstance(key_env, str) or (key_env and _ENV_NAME_RE.fullmatch(key_env) is None):
        raise fail("api_key_env", "must be the name of an environment variable (not the key)")
    iterations = data.get("max_iterations", 8)
    if not isinstance(iterations, int) or isinstance(iterations, bool) or not 0 <= iterations <= 100:
        raise fail("max_iterations", "must be a whole number, 0 to 100")
    return {"base_url": base_url.rstrip("/"), "model": model, "api_key_env": key_env,
            "max_iterations": iterations}


def _permission_keys(data: dict[str, Any], fail: Any) -> dict[str, Any]:
    permissions = data.get("permissions", "safe")
    if permissions not in PERMISSION_MODES:
        raise fail("permissions", f"must be one of {', '.join(PERMISSION_MODES)}, "
                                  f"got {permissions!r}")
    args: dict[str, tuple[str, ...]] = {}
    for mode, value in _per_mode(data.get("permission_args", {}), "permission_args", fail):
        key = f"permission_args.{mode}"
        if not isinstance(value, list):
            raise fail(key, "must be a list of strings (arguments, never a shell line)")
        for i, part in enumerate(value):
            if not isinstance(part, str):
                raise fail(f"{key}[{i}]", f"must be a string, got {type(part).__name__}")
            if "{prompt}" in part or "{session_id}" in part:
                raise fail(f"{key}[{i}]", "must not contain {prompt} or {session_id}")
        args[mode] = tuple(value)
    env: dict[str, dict[str, str]] = {}
    for mode, value in _per_mode(data.get("permission_env", {}), "permission_env", fail):
        env[mode] = _env_table(value, f"permission_env.{mode}", fail)
    return {"permissions": permissions, "permission_args": args, "permission_env": env}


def _per_mode(value: object, key: str, fail: Any) -> list[tuple[str, Any]]:
    if not isinstance(value, dict):
        raise fail(key, "must be a table with safe = ... and full = ...")
    unknown = sorted(set(value) - set(PERMISSION_MODES))
    if unknown:
        raise fail(f"{key}.{unknown[0]}",
                   f"unknown permission mode (known: {', '.join(PERMISSION_MODES)})")
    return list(value.items())


def _env_table(value: object, key: str, fail: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise fail(key, "must be a table of NAME = \"value\"")
    for name, item in value.items():
        if _ENV_NAME_RE.fullmatch(name) is None:
            raise fail(f"{key}.{name}", "is not a valid environment variable name")
        if not isinstance(item, str):
            raise fail(f"{key}.{name}", f"must be a string, got {type(item).__name__}")
    return dict(value)


def _resume_command(value: object, command: tuple[str, ...], fail: Any) -> tuple[str, ...]:
    argv = _argv(value, "resume_command", fail)
    if not any("{session_id}" in part for part in argv):
        raise fail("resume_command", "must contain {session_id}")
    if any("{prompt}" in part for part in command) != any("{prompt}" in p for p in argv):
        raise fail("resume_command", "must take the prompt the same way as command: "
                                     "{prompt} in both, or in neither (prompt on stdin)")
    return argv


def build_argv(manifest: Manifest, *, prompt: str, cwd: str = "", session_id: str | None = None,
               mode: str | None = None, extra: tuple[str, ...] = ()) -> list[str]:
    """The argv of one run: ``command`` (or ``resume_command`` when a session continues),
    the permission mode's arguments, ``extra`` (the run's MCP servers) and ``resume``'s
    arguments.

    Added arguments go before the template's end-of-options ``--`` when it has one, else at
    the end: a command ending ``-- {prompt}`` keeps the prompt after the ``--`` (so a prompt
    starting with ``-`` is never read as a flag). The split is made on the template, before
    the prompt is filled in, so no prompt can move it.
    """
    mode = mode or manifest.permissions
    permission = manifest.permission_args.get(mode, ())
    tail: tuple[str, ...] = ()
    if session_id and manifest.resume_command:
        template = manifest.resume_command
    else:
        template, tail = manifest.command, (manifest.resume if session_id else ())
    cut = template.index("--") if "--" in template else len(template)
    argv = substitute(template[:cut] + permission, prompt=prompt, cwd=cwd,
                      session_id=session_id or "")
    # ``extra`` is never filled in: a server's argument may well contain "{prompt}".
    return (argv + [no_nul(part) for part in extra]
            + substitute(tail + template[cut:], prompt=prompt, cwd=cwd,
                         session_id=session_id or ""))


def _argv(value: object, key: str, fail: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise fail(key, "must be a non-empty list of strings (an argv, never a shell line)")
    for i, part in enumerate(value):
        if not isinstance(part, str):
            raise fail(f"{key}[{i}]", f"must be a string, got {type(part).__name__}")
    if not value[0].strip():
        raise fail(f"{key}[0]", "the program must not be empty")
    if "{prompt}" in value[0]:
        raise fail(f"{key}[0]", "the program cannot be the prompt")
    return tuple(value)


def _stop_policy(value: object, fail: Any) -> StopPolicy:
    if not isinstance(value, dict):
        raise fail("stop", "must be a table")
    unknown = sorted(set(value) - _STOP_KEYS)
    if unknown:
        raise fail(f"stop.{unknown[0]}", "unknown key")
    polite = value.get("polite", "none")
    if polite not in POLITE_STOPS:
        raise fail("stop.polite", f"must be one of {', '.join(POLITE_STOPS)}, got {polite!r}")
    window = value.get("polite_window_ms", 1000)
    if not isinstance(window, int) or isinstance(window, bool) or not 0 <= window <= 60_000:
        raise fail("stop.polite_window_ms", "must be a whole number of milliseconds, 0 to 60000")
    return StopPolicy(polite=polite, polite_window_ms=window)


def _input_mode(data: dict[str, Any], protocol: str, command: tuple[str, ...],
                stop: StopPolicy, fail: Any) -> str:
    mode = data.get("input", "text")
    if mode not in INPUT_MODES:
        raise fail("input", f"must be one of {', '.join(INPUT_MODES)}, got {mode!r}")
    if mode == CLAUDE_STREAM_INPUT:
        if protocol != "claude-stream-json":
            raise fail("input", f"\"{CLAUDE_STREAM_INPUT}\" needs protocol = "
                                f"\"claude-stream-json\" (the turn ends at its result line), "
                                f"got {protocol!r}")
        if any("{prompt}" in part for part in command):
            raise fail("command", f"must not contain {{prompt}} with input = "
                                  f"\"{CLAUDE_STREAM_INPUT}\": the prompt is written to stdin "
                                  "as a stream-json user message")
    elif stop.polite == "interrupt":
        raise fail("stop.polite", f"\"interrupt\" is written to the agent's stdin, so it needs "
                                  f"input = \"{CLAUDE_STREAM_INPUT}\"")
    return str(mode)


def load_manifest_file(path: Path, builtin: bool = False) -> Manifest:
    try:
        raw = tomlfile.read_bytes(path)  # a FIFO or /dev/zero must not hang or flood us
    except tomlfile.SettingsFileError as exc:
        raise ManifestError(path, None, exc.problem) from exc
    if raw is None:
        raise ManifestError(path, None, "cannot read: No such file or directory")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ManifestError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(path, None, f"invalid TOML: {exc}") from exc
    return parse_manifest(data, path, builtin=builtin)


@dataclass
class AdapterSet:
    manifests: dict[str, Manifest]
    errors: list[ManifestError]

    def get(self, agent_id: str) -> Manifest:
        try:
            return self.manifests[agent_id]
        except KeyError:
            known = ", ".join(sorted(self.manifests)) or "none"
            broken = [e for e in self.errors if e.path and e.path.stem == agent_id]
            if broken:
                raise KeyError(f"agent {agent_id!r} has a broken manifest: {broken[0]}") from None
            raise KeyError(f"unknown agent {agent_id!r} (known: {known})") from None


def builtin_adapters_dir() -> Path:
    return paths.package_data("adapters")


def load_adapters(
    builtin_dir: Path | None = None, user_dir: Path | None = None
) -> AdapterSet:
    """Every manifest, built-ins first, user files overriding by id; errors collected, not raised."""
    manifests: dict[str, Manifest] = {}
    errors: list[ManifestError] = []
    for folder, builtin in (
        (builtin_dir or builtin_adapters_dir(), True),
        (user_dir or paths.user_adapters_dir(), False),
    ):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                manifest = load_manifest_file(path, builtin=builtin)
            except ManifestError as exc:
                errors.append(exc)
                continue
            manifests[manifest.id] = manifest
    return AdapterSet(manifests, errors)


def _model_args(data: dict[str, Any], protocol: str, fail: Any) -> tuple[str, ...]:
    if "model_args" not in data:
        return ()
    if protocol == OPENAI_CHAT:
        raise fail("model_args", "not used by protocol openai-chat (its model is `model`)")
    value = data["model_args"]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise fail("model_args", 'must be a list of strings with {model}, e.g. ["--model", '
                                 '"{model}"]')
    if sum(part.count("{model}") for part in value) != 1:
        raise fail("model_args", "must contain {model} exactly once")
    if any(p in part for part in value for p in ("{prompt}", "{session_id}")):
        raise fail("model_args", "must not contain {prompt} or {session_id}")
    return tuple(value)
