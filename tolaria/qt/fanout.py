"""The window's side of fan-out jobs (one prompt to several agents): starts the member chats
through the chat controller, stops a job's own runs, reports ``job_created`` / ``job_changed``.

What a job is, its member titles, its status rules and its ``fanout_job`` markers are Qt-free:
tolaria/chats/fanout.py.
"""

from __future__ import annotations

import os
from dataclasses import replace

from PySide6.QtCore import QObject

from tolaria.chats.engine.limits import JobBudget
from tolaria.chats.fanout import (
    FanOutJob,
    JobMember,
    member_status,
    member_title,
    new_job_id,
    record_member,
    stored_jobs,
    stored_status,
)
from tolaria.core.limits import RunLimits
from tolaria.core.store.db import Store
from tolaria.qt.bridge import Bridge
from tolaria.qt.controller import ChatController


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
                  agent_names: dict[str, str] | None = None,
                  budget: RunLimits | None = None, host: str = "") -> FanOutJob | None:
        """Create one conversation per agent and start the prompt in each, at once.
        ``budget``: the job's, over all its runs (cost, tokens, tool calls; ADR 0021).
        ``host``: where the job's agents run ("" this computer; ``cwd`` "" there: its home)."""
        agents = list(dict.fromkeys(a for a in agents if a))
        if not prompt.strip() or not agents:
            return None
        names = agent_names or {}
        job_id = new_job_id()
        members = []
        for agent in agents:
            title = member_title(prompt, names.get(agent, agent))
            folder = (cwd or None) if host else (cwd or os.getcwd())
            conversation = self.chats.engine.new_conversation(agent, folder, title=title,
                                                              host=host or None)
            members.append(JobMember(conversation.id, agent))
        job = FanOutJob(job_id, prompt, tuple(members))
        self._jobs[job_id] = job
        self.bridge.job_created.emit(job)  # the view's panes exist before the runs start
        started = []
        shared = JobBudget(budget.effective()) if budget is not None \
            and budget.effective().active() else None
        for member in members:
            stream_id = self.chats.send(member.conversation_id, prompt, budget=shared)
            if stream_id is not None:
                self._job_of_stream[stream_id] = job_id
            started.append(replace(member, stream_id=stream_id))
            record_member(self.store, job, started[-1])
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
        return stored_jobs(self.store)

    def job(self, job_id: str) -> FanOutJob | None:
        known = self._jobs.get(job_id)
        if known is not None:
            return known
        return next((j for j in self.jobs() if j.job_id == job_id), None)

    def member_status(self, member: JobMember) -> str:
        """``completed``, ``cancelled``, ``failed``, ``interrupted`` or ``running``."""
        return member_status(self.store, member)

    def status(self, job_id: str) -> str:
        return stored_status(self.store, self.job(job_id))

    # -- bridge -------------------------------------------------------------------------------
    def _on_bridge_run_finished(self, stream_id: str, _done: object) -> None:
        job_id = self._job_of_stream.pop(stream_id, None)
        if job_id is not None:
            self.bridge.job_changed.emit(job_id, self.status(job_id))
