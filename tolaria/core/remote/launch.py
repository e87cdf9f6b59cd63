"""What a turn does differently when its agent runs on another machine (ADR 0026).

The turn spawns the link (link.py) in place of the agent, with the agent's argv, folder and the
environment Tolaria adds (manifest ``[env]``, permission env, the marker; not the laptop's own
environment) in a private spec file. The polite stop is the turn's usual signal to that process;
the tree kill is ``end``: SIGUSR1 (the supervisor ends the remote tree and reports), then the
link's exit is awaited and its report read. The local tree kill that follows finds only what
is left locally (the ssh client, if anything).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from tolaria.core.events import Survivor
from tolaria.core.remote import bootstrap
from tolaria.core.remote.hosts import Target

#: How long the supervisor may take beyond the grace period to report the tree gone.
_REPORT_SLACK_S = 8.0
#: How long a link asked to let go (a kept run at quit) may take before it is killed.
_LET_GO_S = 15.0


def link_note(line: str) -> bool:
    """Whether a stderr line of the link is its note for the chat (keep-running: reconnecting,
    reattached with what was replayed or dropped), shown in the turn, not with the errors."""
    return line.startswith(("tolaria: reconnecting to ", "tolaria: reattached to "))


class RemoteLaunch:
    """One remote run's link: its spec and report files, its stop and its outcome."""

    def __init__(self, target: Target, stream_id: str, grace_s: float) -> None:
        self.target = target
        self.stream_id = stream_id
        self.grace_s = grace_s
        self.folder = tempfile.mkdtemp(prefix="tolaria-remote-")
        self.spec_path = os.path.join(self.folder, "spec.json")
        self.report_path = os.path.join(self.folder, "report.json")
        self._report: dict[str, Any] | None = None
        self._letting_go: asyncio.Future[None] | None = None

    @property
    def local_cwd(self) -> str:
        """Where the link runs locally (the agent's folder is on the host)."""
        return self.folder

    def prepare(self, agent_id: str, argv: Sequence[str], cwd: str | None,
                env: Mapping[str, str], files: Mapping[str, str] | None = None,
                exact: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
        """The link's argv and environment for the agent's ``argv`` run in ``cwd`` there.

        Only what Tolaria adds to the environment goes to the host (the laptop's PATH, HOME or
        DISPLAY mean nothing there), then the host's own per-host environment. ``exact``: goes
        as it is, even where it equals the local value (the MCP servers' values); ``files``: the
        run's private files the supervisor writes there (ADR 0019, "On a host").
        """
        target = self.target
        extra = {k: v for k, v in env.items() if os.environ.get(k) != v and k != "PWD"}
        extra.update(exact or {})
        extra.update(target.env)
        remote = [target.programs.get(agent_id) or argv[0], *argv[1:]]
        spec = {"label": target.label, "report": self.report_path,
                "transport": target.argv(bootstrap.remote_argv(target.python, target.cache_dir)),
                "argv": remote, "cwd": cwd, "env": extra, "stream_id": self.stream_id,
                "heartbeat_s": target.heartbeat_s, "grace_s": self.grace_s}
        if files:
            spec["files"] = dict(files)
        if target.keep_running or target.attach_offset is not None:
            spec.update(keep_for_s=target.keep_s, buffer_bytes=target.buffer_bytes,
                        reconnect_s=target.reconnect_s)
        if target.attach_offset is not None:
            spec.update(attach=True, offset=target.attach_offset)
        fd = os.open(self.spec_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        # The link itself runs with our environment (it needs the ssh agent, our PATH) and
        # carries the run's marker, so the watchdog finds it.
        # ``askpass_env`` (ADR 0033) is for the local ssh only: not in the spec's env.
        return ([sys.executable, "-m", "tolaria.core.remote.link", self.spec_path],
                {**env, **target.askpass_env})

    async def end(self, pid: int, exited: asyncio.Event) -> None:
        """End the remote tree (unless the run already ended there) and wait for the report."""
        if not exited.is_set():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, getattr(signal, "SIGUSR1", signal.SIGTERM))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(exited.wait(), self.grace_s + _REPORT_SLACK_S)

    async def ready(self, exited: asyncio.Event, within: float = 5.0) -> None:
        """Wait until the link handles its signals (it removes the spec file then): a stop
        that came with the spawn (a chat deleted while its kept run is taken back) must be
        its frames, not the link's death before it could send them."""
        for _ in range(int(within / 0.01)):
            if exited.is_set() or not os.path.exists(self.spec_path):
                return
            await asyncio.sleep(0.01)

    def let_go(self, pid: int, exited: asyncio.Event) -> None:
        """Close the link's connection without a stop (SIGUSR2, once the link handles it): a
        kept run goes on there. On the running loop."""
        self._letting_go = asyncio.ensure_future(self._let_go(pid, exited))

    async def _let_go(self, pid: int, exited: asyncio.Event) -> None:
        await self.ready(exited)
        if exited.is_set():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, getattr(signal, "SIGUSR2", signal.SIGTERM))
        try:  # it lets go within seconds (a START held, then 1 s for its ssh)
            await asyncio.wait_for(exited.wait(), _LET_GO_S)
        except TimeoutError:  # a hung link must not hang the quit: a drop all the same
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))

    @property
    def report(self) -> dict[str, Any]:
        if self._report is None:
            try:
                with open(self.report_path, encoding="utf-8") as fh:
                    loaded = json.load(fh)
            except (OSError, ValueError):
                return {}
            self._report = loaded if isinstance(loaded, dict) else {}
        return self._report

    @property
    def error(self) -> str | None:
        """Why the run could not start or lost its link, in one line (None: it ran)."""
        error = self.report.get("error")
        return str(error) if error else None

    def survivors(self) -> list[Survivor]:
        """What the supervisor could not end on the host; unknown when it never reported."""
        report = self.report
        if not report:
            return [Survivor(0, f"unknown: no report from {self.target.label}")]
        out = []
        for item in report.get("survivors") or ():
            with contextlib.suppress(TypeError, ValueError, IndexError):
                out.append(Survivor(int(item[0]), f"{item[1]} on {self.target.label}"))
        return out

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
