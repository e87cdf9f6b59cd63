"""Is an agent's program installed, where, and which version? (``tolaria agents``).

The program is found as a run would find it (:mod:`tolaria.core.programs.locate`: PATH, the login
shell's PATH, the usual install folders; a wrapper script gives way to its native binary), and
its version command is run with a timeout. Every error says what to do about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from tolaria.core.adapters.manifest import OPENAI_CHAT, Manifest, substitute
from tolaria.core.process import proctree
from tolaria.core.programs import locate

PROBE_TIMEOUT_S = 5.0
#: Exit code of a shell or ``env`` that could not find a program (``#!/usr/bin/env node``).
_EXIT_NOT_FOUND = 127
_VERSION_RE = re.compile(r"\d+\.\d+")
#: A local model server's liveness check: a TCP connect, this short, its answer kept this long
#: (the picker and Preferences ask often; a dead port answers at once anyway).
SERVER_PROBE_TIMEOUT_S = 0.5
SERVER_PROBE_TTL_S = 5.0
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "[::1]"})
#: How to start the local model servers Tolaria ships adapters for (by manifest id).
SERVER_START = {"ollama": "ollama serve", "lmstudio": "lms server start",
                "llamacpp": "llama-server -m model.gguf --jinja"}
_server_cache: dict[tuple[str, int], tuple[float, bool]] = {}


@dataclass(frozen=True)
class Detection:
    agent: str
    name: str
    protocol: str
    #: The program a run spawns (the native binary when its npm wrapper is bypassed).
    path: str | None
    version: str | None
    error: str | None
    #: Which search found it: "PATH", "login shell", "npm global", "nvm", ... (``locate``).
    source: str | None = None
    #: Where the command was found by name (the wrapper script when ``path`` is native).
    found_at: str | None = None
    #: Whether ``path`` is the native binary behind the wrapper at ``found_at``.
    native: bool = False


async def probe_version(argv: list[str], timeout: float = PROBE_TIMEOUT_S,
                        env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """Run ``argv`` (a ``--version`` call); return (first output line, error)."""
    label = " ".join([os.path.basename(argv[0]), *argv[1:]])
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            env=None if env is None else dict(env),
        )
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            return None, f"{argv[0]} is not executable (chmod +x it, or reinstall)"
        return None, f"cannot run {argv[0]}: {exc.strerror or exc}"
    # Ours on purpose: a stop of some run must never take it for an adopted orphan.
    proctree.remember_own_child(proc.pid)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            if sys.platform == "win32":  # no process groups (and no runs: ADR 0014)
                proc.kill()
            else:
                os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        return None, (f"`{label}` timed out after {timeout:g} s (it may be waiting for input or "
                      "a first-run setup: try it in a terminal)")
    finally:
        proctree.forget_own_child(proc.pid)
    lines = [line.strip() for line in out.decode(errors="replace").splitlines() if line.strip()]
    first = lines[0][:200] if lines else ""
    if proc.returncode != 0:
        said = f": {first}" if first else " and printed nothing"
        hint = (" (a program it needs, such as node, may be missing from PATH)"
                if proc.returncode == _EXIT_NOT_FOUND else "")
        return None, f"`{label}` exited with code {proc.returncode}{said}{hint}"
    # Some CLIs print a warning first (Codex, about its home folder): prefer a version line.
    versioned = next((line for line in lines if _VERSION_RE.search(line)), first)
    return versioned[:200] or None, None


def local_server(base_url: str) -> tuple[str, int] | None:
    """(host, port) of a model endpoint on this machine; ``None`` for a remote one."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if host not in LOCAL_HOSTS:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return host, port


async def server_alive(host: str, port: int, timeout: float = SERVER_PROBE_TIMEOUT_S) -> bool:
    """Whether something accepts connections at host:port (cached for ``SERVER_PROBE_TTL_S``).

    A TCP connect on the event loop: it never blocks the GUI thread, and a refused port
    answers at once."""
    now = time.monotonic()
    cached = _server_cache.get((host, port))
    if cached is not None and now - cached[0] < SERVER_PROBE_TTL_S:
        return cached[1]
    alive = False
    with contextlib.suppress(OSError, TimeoutError):
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        alive = True
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    _server_cache[(host, port)] = (time.monotonic(), alive)
    return alive


def start_hint(manifest: Manifest) -> str:
    """The one thing to do when a local model server is not running."""
    command = SERVER_START.get(manifest.id)
    return (f"not running: start it with `{command}`" if command
            else f"not running: start the server at {manifest.base_url}")


async def detect(manifest: Manifest, timeout: float = PROBE_TIMEOUT_S) -> Detection:
    if manifest.protocol == OPENAI_CHAT:
        # A model endpoint, not a program: on this machine, is its server up?
        missing = manifest.api_key_env and not os.environ.get(manifest.api_key_env)
        error = f"set {manifest.api_key_env} to your API key" if missing else None
        local = local_server(manifest.base_url)
        if local is not None and not await server_alive(*local):
            error = start_hint(manifest)
        return Detection(manifest.id, manifest.name, manifest.protocol, manifest.base_url, None,
                         error)
    argv = substitute(manifest.command, prompt="", cwd=os.getcwd())
    try:
        found = await locate.find_program(argv[0], os.environ)
    except locate.ProgramNotFound as exc:
        hint = f"; install with: {manifest.install_hint}" if manifest.install_hint else ""
        return Detection(manifest.id, manifest.name, manifest.protocol, None, None,
                         f"{exc}{hint}")
    version, error = None, None
    if manifest.version_command:
        vargv = substitute(manifest.version_command, prompt="", cwd=os.getcwd())
        try:
            vfound = found if vargv[0] == argv[0] else await locate.find_program(vargv[0],
                                                                                 os.environ)
        except locate.ProgramNotFound as exc:
            error = f"version command: {exc}"
        else:
            version, error = await probe_version(vfound.argv(vargv[1:]), timeout,
                                                 vfound.environment(os.environ))
    # For a script relaunched under its interpreter (qwen: node cli.js), the script is the agent.
    shown = found.args[-1] if found.args else found.program
    return Detection(manifest.id, manifest.name, manifest.protocol, shown, version, error,
                     source=found.source, found_at=found.found_at, native=found.native)


async def detect_all(manifests: list[Manifest], timeout: float = PROBE_TIMEOUT_S) -> list[Detection]:
    return list(await asyncio.gather(*(detect(m, timeout) for m in manifests)))
