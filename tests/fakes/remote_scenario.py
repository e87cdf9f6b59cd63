"""One remote run, as whoever runs this: ``python remote_scenario.py JSON``.

Used by tests/remote/ as the non-root local side: the turn, its link and ``ssh`` run as this
user, who cannot signal the remote account's processes. JSON: ``host`` (a destination),
``ssh_config``, ``mode`` (fake_agent.py's), ``cwd``, ``env``, ``stream_id``, ``action``
("finish": let it end; "stop": abort once it started; "disconnect": SIGKILL our ssh client once it
started; "freeze": SIGSTOP it for ``hold`` seconds (a silent drop), then SIGKILL it; "wait":
let the test act, e.g. kill the remote sshd session), ``grace``, ``heartbeat_s``, ``python``, ``cache_dir``;
``agent`` (a built-in adapter instead of the fake agent), ``permission_mode``, ``wait_file`` (act
once this file exists, instead of after the ``wait_for`` event; the test makes it) and ``wait_s``.
Prints one JSON line: ``stop_reason``, ``exit_code``, ``survivors``, ``errors``, ``text``,
``stop_ms``, ``kinds``, ``acted_at`` (time.time() of the stop or the kill).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

FAKE_AGENT = Path(__file__).resolve().parent / "fake_agent.py"


def _children(pid: int) -> list[tuple[int, bytes]]:
    """(pid, name) of the children of ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)
            name = fields[0].split(b"(", 1)[1]
            ppid = int(fields[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            out.append((int(entry), name))
    return out


def _ssh_children(pid: int) -> list[int]:
    return [child for child, name in _children(pid) if name == b"ssh"]


def _descendant_ssh() -> list[int]:
    """The ssh clients of *our* links: other scenarios (other test runs) may run at once."""
    found = []
    for link, _name in _children(os.getpid()):
        with contextlib.suppress(OSError), open(f"/proc/{link}/cmdline", "rb") as fh:
            if b"tolaria.core.remote.link" in fh.read():
                found += [pid for pid, name in _children(link) if name == b"ssh"]
    return found


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        return int(fh.read().rsplit(b")", 1)[1].split()[1])


def _links(own: bool = True) -> list[int]:
    """The links running (``own``: this process's only, other runs may go on meanwhile)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if b"tolaria.core.remote.link" in fh.read() and (
                            not own or _ppid(int(entry)) == os.getpid()):
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _mcp_servers(cfg: dict[str, Any]) -> tuple[Any, ...]:
    """``cfg["mcp"]``: the MCP servers of the run, as McpServer's fields (pairs as lists)."""
    from tolaria.core.mcp.servers import McpServer

    servers = []
    for server in cfg.get("mcp") or ():
        fields: dict[str, Any] = {k: tuple(tuple(x) if isinstance(x, list) else x for x in v)
                                  if isinstance(v, list) else v for k, v in server.items()}
        servers.append(McpServer(**fields))
    return tuple(servers)


async def scenario(cfg: dict[str, Any]) -> dict[str, Any]:
    from tolaria.core.adapters.manifest import Manifest, load_adapters
    from tolaria.core.events import Diagnostic, Done, Error, Event, TextDelta
    from tolaria.core.process.registry import ProcessRegistry
    from tolaria.core.remote.hosts import parse_destination
    from tolaria.core.turns.runner import RunRequest, stream_ai_agent

    command = tuple(cfg.get("command") or ("python3", str(FAKE_AGENT), cfg.get("mode", "normal"), "{prompt}"))
    manifest = Manifest(id="scenario", name=f"remote {cfg.get('mode')}",
                        protocol=cfg.get("protocol", "claude-stream-json"), command=command)
    if cfg.get("agent"):  # a real CLI, through Tolaria's own adapter for it
        manifest = load_adapters().get(cfg["agent"])
    if cfg.get("mcp_form"):  # the fake agent given MCP servers in that form (it ignores them)
        from dataclasses import replace

        from tolaria.core.adapters.mcp_spec import McpSpec

        manifest = replace(manifest, mcp=McpSpec(form=cfg["mcp_form"]))
    settings: dict[str, Any] = {"ssh_config": cfg.get("ssh_config"),
                                "heartbeat_s": float(cfg.get("heartbeat_s", 3.0))}
    for key in ("python", "cache_dir", "keep_running", "keep_s", "buffer_bytes", "reconnect_s",
                "attach_offset"):
        if cfg.get(key) is not None:
            settings[key] = cfg[key]
    target = parse_destination(cfg["host"], **settings)
    registry = ProcessRegistry()
    sid = cfg["stream_id"]
    events: list[Event] = []
    task = asyncio.ensure_future(stream_ai_agent(
        RunRequest(manifest, cfg.get("prompt", "go"), cfg.get("cwd"), cfg.get("env") or {},
                   permission_mode=cfg.get("permission_mode"), target=target,
                   mcp_servers=_mcp_servers(cfg), mcp_on_failure=cfg.get("mcp_on_failure",
                                                                         "continue")), sid,
        events.append, registry=registry, grace_s=float(cfg.get("grace", 0.5))))
    action = cfg.get("action", "finish")
    acted_at = started = 0.0
    if action in ("stop", "disconnect", "freeze", "drop_hold"):
        deadline = time.monotonic() + float(cfg.get("wait_s", 30))
        wait_for = cfg.get("wait_for", "init")  # the event after which the tree is there
        wait_file = Path(cfg["wait_file"]) if cfg.get("wait_file") else None
        while not (wait_file.exists() if wait_file else any(e.kind == wait_for for e in events)):
            if task.done() or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(float(cfg.get("settle", 0.3)))  # the tree grows its children
        started, acted_at = time.monotonic(), time.time()
        if action == "stop":
            registry.abort(sid)
        elif action == "freeze":  # a silent drop: the link stays, nothing goes through it
            ssh = _descendant_ssh()
            for pid in ssh:
                os.kill(pid, signal.SIGSTOP)
            await asyncio.sleep(float(cfg.get("hold", 7.0)))
            for pid in ssh:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        elif action == "disconnect":
            for pid in _descendant_ssh():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        elif action == "drop_hold":  # ssh killed, and no reconnect for ``hold`` seconds
            links = _links()  # ours only: other runs may be going on on this machine
            for pid in links:
                os.kill(pid, signal.SIGSTOP)
            for pid in [ssh for link in links for ssh in _ssh_children(link)]:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if cfg.get("hold_file"):
                Path(cfg["hold_file"]).write_text("held")
            await asyncio.sleep(float(cfg.get("hold", 3.0)))
            for pid in links:
                os.kill(pid, signal.SIGCONT)
    if cfg.get("stop_after") is not None and not task.done():
        await asyncio.sleep(float(cfg["stop_after"]))
        started, acted_at = time.monotonic(), time.time()
        registry.abort(sid)
    done = await asyncio.wait_for(task, 60)
    assert isinstance(done, Done)
    return {"stop_reason": done.stop_reason, "exit_code": done.exit_code,
            "survivors": [[s.pid, s.name] for s in done.survivors],
            "errors": [e.message for e in events if isinstance(e, Error)],
            "hints": [e.hint for e in events if isinstance(e, Error)],
            "diagnostics": [e.message[:500] for e in events if isinstance(e, Diagnostic)],
            "text": "".join(e.text for e in events if isinstance(e, TextDelta)),
            "deltas": sum(1 for e in events if isinstance(e, TextDelta)),
            "in_order": all(e.text.startswith(f"flood {i}: ") for i, e in
                            enumerate(e for e in events if isinstance(e, TextDelta))),
            "kinds": [e.kind for e in events],
            "ticks": [int(line.split()[1].rstrip(".")) for line in "".join(
                e.text for e in events if isinstance(e, TextDelta)).splitlines()
                if line.startswith("tick ")],
            "notes": [e.message for e in events if isinstance(e, Diagnostic)
                      and (e.source == "notice" or e.message.startswith("tolaria: "))],
            "stop_ms": (time.monotonic() - started) * 1000 if started else None,
            "acted_at": acted_at}


def main() -> int:
    arg = sys.argv[1]  # the JSON, or @FILE holding it (a long prompt exceeds argv's limit)
    cfg = json.loads(Path(arg[1:]).read_text() if arg.startswith("@") else arg)
    print(json.dumps(asyncio.run(scenario(cfg))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
