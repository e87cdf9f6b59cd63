"""Is an agent's program installed, where, and which version? (``tolaria agents``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass

from tolaria.core import proctree
from tolaria.core.adapters import OPENAI_CHAT, Manifest, substitute
from tolaria.core.agent_process import resolve_program

PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Detection:
    agent: str
    name: str
    protocol: str
    path: str | None
    version: str | None
    error: str | None


async def probe_version(argv: list[str], timeout: float = PROBE_TIMEOUT_S) -> tuple[str | None, str | None]:
    """Run ``argv`` (a ``--version`` call); return (first output line, error)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )
    except OSError as exc:
        return None, f"cannot run {argv[0]}: {exc.strerror or exc}"
    # Ours on purpose: a stop of some run must never take it for an adopted orphan.
    proctree.remember_own_child(proc.pid)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        return None, f"version probe timed out after {timeout:g} s"
    finally:
        proctree.forget_own_child(proc.pid)
    text = out.decode(errors="replace").strip()
    first = text.splitlines()[0] if text else ""
    if proc.returncode != 0:
        return None, f"version probe exited with code {proc.returncode}: {first[:200]}"
    return first[:200] or None, None


async def detect(manifest: Manifest, timeout: float = PROBE_TIMEOUT_S) -> Detection:
    if manifest.protocol == OPENAI_CHAT:
        # A model endpoint, not a program: report where it is; nothing to probe locally.
        missing = manifest.api_key_env and not os.environ.get(manifest.api_key_env)
        return Detection(manifest.id, manifest.name, manifest.protocol, manifest.base_url, None,
                         f"set {manifest.api_key_env} to your API key" if missing else None)
    argv = substitute(manifest.command, prompt="", cwd=os.getcwd())
    path = resolve_program(argv[0], os.environ)
    if path is None:
        hint = f" (install: {manifest.install_hint})" if manifest.install_hint else ""
        return Detection(manifest.id, manifest.name, manifest.protocol, None, None,
                         f"{argv[0]!r} not found on PATH{hint}")
    version, error = None, None
    if manifest.version_command:
        vargv = substitute(manifest.version_command, prompt="", cwd=os.getcwd())
        vpath = resolve_program(vargv[0], os.environ)
        if vpath is None:
            error = f"{vargv[0]!r} not found on PATH"
        else:
            version, error = await probe_version([vpath, *vargv[1:]], timeout)
    return Detection(manifest.id, manifest.name, manifest.protocol, path, version, error)


async def detect_all(manifests: list[Manifest], timeout: float = PROBE_TIMEOUT_S) -> list[Detection]:
    return list(await asyncio.gather(*(detect(m, timeout) for m in manifests)))
