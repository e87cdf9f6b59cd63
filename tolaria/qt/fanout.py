"""Fan-out jobs (issue 6, item 6): one prompt sent to several agents at once.

A job is not a new kind of run. It is one ordinary conversation per selected agent (titled
"<prompt start> · <agent>"), each running one ordinary turn under its own stream id through the
chat controller's send path; a ``fanout_job`` marker on each member turn groups them by job id.
So every member keeps what it produced with its own status, is reachable from the sidebar like
any chat, and survives a restart; stopping a member is the normal stop of its conversation.

The job's status is derived, never stored: ``running`` while any member runs; once all ended,
``cancelled`` if any member was stopped by the user, else ``failed`` if every member failed, else
``completed``. Partial results are never discarded: a stopped member is a ``cancelled`` turn.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, replace

from PySide6.QtCore import QObject

from tolaria.core.store.db import (
    STATUS_CANCELLED,
    STATUS_COMPLETED,
    STATUS_FAILED,
    STATUS_RUNNING,
    Store,
)
from tolaria.core.store.markers import MARKER_FANOUT_JOB
from tolaria.qt.bridge import Bridge
from tolaria.qt.controller import ChatController

JOB_RUNNING = STATUS_RUNNING
JOB_COMPLETED = STATUS_COMPLETED
JOB_CANCELLED = STATUS_CANCELLED
JOB_FAILED = STATUS_FAILED

_PROMPT_CHARS = 32


@dataclass(frozen=True)
class JobMember:
    """One agent's part of a job: its conversation and the stream id of its turn."""

    conversation_id: int
    agent: str
    stream_id: str | None = None


@dataclass(frozen=True)
class FanOutJob:
    job_id: str
    prompt: str
    members: tuple[JobMember, ...]

    def stream_ids(self) -> list[str]:
        return [m.stream_id for m in self.members if m.stream_id is not None]


def member_title(prompt: str, agent_name: str) -> str:
    line = " ".join(prompt.split())
    if len(line) > _PROMPT_CHARS:
        line = line[: _PROMPT_CHARS - 1].rstrip() + "…"
    return f"{line} · {agent_name}"


def job_status(statuses: list[str]) -> str:
    """The job's status from its members' turn statuses (see the module docstring)."""
    if not statuses or any(s == STATUS_RUNNING for s in statuses):
        return JOB_RUNNING
    if any(s == STATUS_CANCELLED for s in statuses):
        return JOB_CANCELLED
    if all(s == STATUS_FAILED for s in statuses):
        return JOB_FAILED
    return JOB_COMPLETED


class FanOutController(QObject):
    """Starts, stops and reports fan-out jobs; everything else is the chat controller's."""

    def __init__(self, bridge: Bridge, store: Store, chats: ChatController,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.store = store
        self.chats = chats
        #: job id -> job, for the jobs started (or looked at) in this session
        self._jobs: dict[str, FanOutJob] = {}
        self._job_of_stream: dict[str, str] = {}
        # Connected after the chat controller's own slot: the turn's row already holds its
        # final status when this one runs.
        bridge.run_finished.connect(self._on_bridge_run_finished)

    # -- intents ------------------------------------------------------------------------------
    def start_job(self, prompt: str, agents: list[str], cwd: str | None = None,
                  agent_names: dict[str, str] | None = None) -> FanOutJob | None:
        """Create one conversation per agent and start the prompt in each, at once."""
        agents = list(dict.fromkeys(a for a in agents if a))
        if not prompt.strip() or not agents:
            return None
        names = agent_names or {}
        job_id = f"job-{uuid.uuid4().hex[:12]}"
        members = []
        for agent in agents:
            conversation = self.store.create_conversation(
                member_title(prompt, names.get(agent, agent)), agent, cwd or os.getcwd())
            self.bridge.conversation_saved.emit(conversation)
            members.append(JobMember(conversation.id, agent))
        job = FanOutJob(job_id, prompt, tuple(members))
        self._jobs[job_id] = job
        self.bridge.job_created.emit(job)  # the view's panes exist before the runs start
        started = []
        for member in members:
            stream_id = self.chats.send(member.conversation_id, prompt)
            if stream_id is not None:
                self._job_of_stream[stream_id] = job_id
                turn = self.store.turn_by_stream(stream_id)
                self.store.add_marker(member.conversation_id, MARKER_FANOUT_JOB,
                                      turn_id=turn.id if turn is not None else None,
                                      data={"job_id": job_id, "prompt": prompt, "agent":
                                            member.agent, "stream_id": stream_id})
            started.append(replace(member, stream_id=stream_id))
        job = replace(job, members=tuple(started))
        self._jobs[job_id] = job
        self.bridge.job_changed.emit(job_id, self.status(job_id))
        return job

    def stop_job(self, job_id: str) -> list[str]:
        """Stop this job's running members only (other chats' runs are untouched)."""
        job = self.job(job_id)
        stopped = []
        for member in job.members if job is not None else ():
            if member.stream_id is not None and self._stop(member.conversation_id,
                                                           member.stream_id):
                stopped.append(member.stream_id)
        return stopped

    def _stop(self, conversation_id: int, stream_id: str | None) -> bool:
        # Only the job's own turn: a later turn typed in that chat is not the job's to stop.
        if stream_id is None or self.chats.running_stream(conversation_id) != stream_id:
            return False
        return self.chats.stop(conversation_id)

    # -- queries ------------------------------------------------------------------------------
    def jobs(self) -> list[FanOutJob]:
        """Every stored job, oldest first (members in the order they were started)."""
        found: dict[str, FanOutJob] = {}
        for marker in self.store.markers_of_kind(MARKER_FANOUT_JOB):
            data = marker.data if isinstance(marker.data, dict) else {}
            job_id = str(data.get("job_id", ""))
            if not job_id:
                continue
            member = JobMember(marker.conversation_id, str(data.get("agent", "")),
                               data.get("stream_id"))
            job = found.get(job_id)
            found[job_id] = (FanOutJob(job_id, str(data.get("prompt", "")), (member,))
                             if job is None else replace(job, members=(*job.members, member)))
        return list(found.values())

    def job(self, job_id: str) -> FanOutJob | None:
        known = self._jobs.get(job_id)
        if known is not None:
            return known
        return next((j for j in self.jobs() if j.job_id == job_id), None)

    def member_status(self, member: JobMember) -> str:
        """``completed``, ``cancelled``, ``failed``, ``interrupted`` or ``running``."""
        if member.stream_id is None:
            return STATUS_FAILED  # it could not start (conversation busy or gone)
        turn = self.store.turn_by_stream(member.stream_id)
        if turn is None:
            return STATUS_FAILED
        return turn.status

    def status(self, job_id: str) -> str:
        job = self.job(job_id)
        if job is None:
            return JOB_FAILED
        return job_status([self.member_status(m) for m in job.members])

    # -- bridge -------------------------------------------------------------------------------
    def _on_bridge_run_finished(self, stream_id: str, _done: object) -> None:
        job_id = self._job_of_stream.pop(stream_id, None)
        if job_id is not None:
            self.bridge.job_changed.emit(job_id, self.status(job_id))
