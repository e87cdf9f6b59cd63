"""Which agents a host has, with versions, as a run there would find them (ADR 0034).

One connection per look: ``Target.argv`` (the user's ssh, its config, BatchMode, ConnectTimeout)
runs ``python3 -c LOADER SIZE`` on the host; the probe (``agent_probe.py``) and the request go
down stdin, one ``TOLARIA-AGENTS`` line comes back. Each agent's program is the one its run
would start: the manifest's command (with the agent's overrides, as given), the host's
``programs`` override first, resolved there like the supervisor resolves it (PATH with the
host's and the agent's environment, then the login shell). The whole look is bounded
(``DISCOVERY_TIMEOUT_S``): no answer in time kills the ssh client's process group and says so
in one line, as do ssh's refusals (``link.classify``).

No Qt: the window runs ``discover`` as a task on its loop (tolaria/qt/host_agents.py), so the
window never waits on a host.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tolaria.core.adapters.manifest import OPENAI_CHAT, Manifest, substitute
from tolaria.core.process import proctree
from tolaria.core.programs.discovery import Detection
from tolaria.core.remote.hosts import Target

#: Each version command on the host may take this long (the login shell twice this).
HOST_PROBE_TIMEOUT_S = 5.0
#: The whole look: ssh's ConnectTimeout (10 s) plus the probes, then it is given up.
DISCOVERY_TIMEOUT_S = 25.0
_MARK = b"TOLARIA-AGENTS "
#: Runs on the host: reads SIZE bytes of the probe's source from stdin and runs it.
LOADER = "import sys;exec(compile(sys.stdin.buffer.read(int(sys.argv[1])),'tolaria-agents','exec'))"


@functools.cache
def probe_source() -> bytes:
    return (Path(__file__).resolve().parent / "agent_probe.py").read_bytes()


@dataclass(frozen=True)
class HostAgents:
    """What one look at a host found: a Detection per agent, or the one-line reason none."""

    host: str
    detections: tuple[Detection, ...] = ()
    #: Why the host could not be asked (None: it answered).
    error: str | None = None
    #: When the look ended (``time.time()``), for "checked 2 min ago".
    checked_at: float = field(default_factory=time.time)
    #: The host's Python, system and login shell, as it said.
    info: dict[str, str] = field(default_factory=dict)

    def get(self, agent: str) -> Detection | None:
        return next((d for d in self.detections if d.agent == agent), None)


def remote_manifests(manifests: Sequence[Manifest]) -> list[Manifest]:
    """The agents that run on a host (a model endpoint is reached from this computer)."""
    return [m for m in manifests if m.protocol != OPENAI_CHAT]


def request_for(target: Target, manifests: Sequence[Manifest],
                timeout: float = HOST_PROBE_TIMEOUT_S) -> dict[str, Any]:
    """The probe's request: per agent the program its run would start there, the version
    command, and the environment the run would add (the manifest's ``[env]``)."""
    agents = []
    for manifest in remote_manifests(manifests):
        argv = _there(manifest.command, target) if manifest.command else [""]
        program = target.programs.get(manifest.id) or argv[0]
        version = _there(manifest.version_command, target) if manifest.version_command else []
        agents.append({"id": manifest.id, "program": program, "set": manifest.id in target.programs,
                       "version": version, "same": bool(version) and version[0] == argv[0],
                       "env": dict(manifest.env)})
    return {"agents": agents, "env": dict(target.env), "timeout": timeout}


def _there(template: Sequence[str], target: Target) -> list[str]:
    """An argv template filled for the host: ``{python}`` is the host's Python, not ours."""
    return substitute(tuple(part.replace("{python}", target.python) for part in template))


async def discover(target: Target, manifests: Sequence[Manifest],
                   timeout: float = DISCOVERY_TIMEOUT_S,
                   probe_timeout: float = HOST_PROBE_TIMEOUT_S) -> HostAgents:
    """Ask ``target`` once which of ``manifests`` it has; never raises for a bad host."""
    label = target.label
    source = probe_source()
    request = json.dumps(request_for(target, manifests, probe_timeout)).encode()
    argv = target.argv([target.python, "-c", LOADER, str(len(source))])
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True,
            env={**{k: v for k, v in os.environ.items() if k != proctree.ENV_MARKER},
                 **target.askpass_env})  # the window's askpass (ADR 0033), for ssh only
    except OSError as exc:
        return HostAgents(label, error=f"cannot run {argv[0]} to reach {label}: "
                                       f"{exc.strerror or exc}")
    # Ours on purpose: a stop of some run must never take it for an adopted orphan.
    proctree.remember_own_child(proc.pid)
    try:
        try:
            out, err = await asyncio.wait_for(proc.communicate(source + request), timeout)
        except TimeoutError:
            return HostAgents(label, error=f"no answer from {label} within {timeout:g} s (the "
                                           "host or the network may be down)")
    finally:
        if proc.returncode is None:
            await _kill(proc)
        proctree.forget_own_child(proc.pid)
    return _answer(target, manifests, proc.returncode, out, err)


def _answer(target: Target, manifests: Sequence[Manifest], code: int | None, out: bytes,
            err: bytes) -> HostAgents:
    # Imported here: the link is a POSIX program that refuses to load on Windows, where runs
    # (and so hosts) are refused anyway (ADR 0014).
    from tolaria.core.remote.link import classify

    label = target.label
    line = next((x for x in out.splitlines() if x.startswith(_MARK)), None)
    stderr = [x for x in err.decode(errors="replace").splitlines() if x.strip()]
    if line is None:
        if code == 127 and not any("ssh:" in x for x in stderr):
            return HostAgents(label, error=f"no Python on {label} to look for agents (set the "
                                           "host's python in settings)")
        return HostAgents(label, error=classify(label, code, stderr).replace(
            "cannot start the run on", "cannot look for agents on"))
    try:
        data = json.loads(line[len(_MARK):].decode(errors="replace"))
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("agents"), list):
        return HostAgents(label, error=f"{label} answered something unreadable")
    if data.get("error"):
        return HostAgents(label, error=f"{label}: {data['error']}")
    by_id = {m.id: m for m in manifests}
    found = []
    for item in data["agents"]:
        manifest = by_id.get(str(item.get("id")))
        if manifest is None:
            continue
        path = item.get("path")
        found.append(Detection(manifest.id, manifest.name, manifest.protocol,
                               str(path) if path else None,
                               str(item["version"]) if item.get("version") else None,
                               str(item["error"]) if item.get("error") else None,
                               source=str(item["source"]) if item.get("source") else None))
    info = {k: str(data[k]) for k in ("python", "system", "machine", "shell") if data.get(k)}
    return HostAgents(label, tuple(found), info=info)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """The ssh client (or command prefix) and its group: nothing of the look is left here."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if sys.platform == "win32":
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 2.0)
