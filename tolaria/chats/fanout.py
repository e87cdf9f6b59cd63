"""Fan-out jobs (issue 6, item 6): one prompt sent to several agents at once; the Qt-free rules.

A job is not a new kind of run. It is one ordinary conversation per selected agent (titled
"<prompt start> · <agent>"), each running one ordinary turn under its own stream id through the
chat controller's send path; a ``fanout_job`` marker on each member turn groups them by job id.
So every member keeps what it produced with its own status, is reachable from the sidebar like
any chat, and survives a restart; stopping a member is the normal stop of its conversation.

The job's status is derived, never stored: ``running`` while any member runs; once all ended,
``cancelled`` if any member was stopped by the user, else ``failed`` if every member failed, else
``completed``. Partial results are never discarded: a stopped member is a ``cancelled`` turn.

The window's glue (signals, starting and stopping through the chat controller) is
tolaria/qt/fanout.py.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from tolaria.chats.titles import clip_line
from tolaria.core.store.db import (
    STATUS_CANCELLED,
    STATUS_COMPLETED,
    STATUS_FAILED,
    STATUS_RUNNING,
    Store,
)
from tolaria.core.store.markers import MARKER_FANOUT_JOB

JOB_RUNNING = STATUS_RUNNING
JOB_COMPLETED = STATUS_COMPLETED
JOB_CANCELLED = STATUS_CANCELLED
JOB_FAILED = STATUS_FAILED

#: Characters of the prompt in a member chat's title.
PROMPT_CHARS = 32


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


def new_job_id() -> str:
    return f"job-{uuid.uuid4().hex[:12]}"


def member_title(prompt: str, agent_name: str) -> str:
    """A member chat's title: "<prompt start> · <agent>"."""
    return f"{clip_line(prompt, PROMPT_CHARS)} · {agent_name}"


def job_status(statuses: list[str]) -> str:
    """The job's status from its members' turn statuses (see the module docstring)."""
    if not statuses or any(s == STATUS_RUNNING for s in statuses):
        return JOB_RUNNING
    if any(s == STATUS_CANCELLED for s in statuses):
        return JOB_CANCELLED
    if all(s == STATUS_FAILED for s in statuses):
        return JOB_FAILED
    return JOB_COMPLETED


def record_member(store: Store, job: FanOutJob, member: JobMember) -> None:
    """The ``fanout_job`` marker on a started member's turn (it groups the job in the store)."""
    if member.stream_id is None:
        return
    turn = store.turn_by_stream(member.stream_id)
    store.add_marker(member.conversation_id, MARKER_FANOUT_JOB,
                     turn_id=turn.id if turn is not None else None,
                     data={"job_id": job.job_id, "prompt": job.prompt, "agent": member.agent,
                           "stream_id": member.stream_id})


def stored_jobs(store: Store) -> list[FanOutJob]:
    """Every stored job, oldest first (members in the order they were started)."""
    found: dict[str, FanOutJob] = {}
    for marker in store.markers_of_kind(MARKER_FANOUT_JOB):
        data = marker.data if isinstance(marker.data, dict) else {}
        job_id = str(data.get("job_id", ""))
        if not job_id:
            continue
        stream_id = data.get("stream_id")
        member = JobMember(marker.conversation_id, str(data.get("agent", "")),
                           stream_id if isinstance(stream_id, str) else None)
        job = found.get(job_id)
        found[job_id] = (FanOutJob(job_id, str(data.get("prompt", "")), (member,))
                         if job is None else replace(job, members=(*job.members, member)))
    return list(found.values())


def member_status(store: Store, member: JobMember) -> str:
    """``completed``, ``cancelled``, ``failed``, ``interrupted`` or ``running``."""
    if member.stream_id is None:
        return STATUS_FAILED  # it could not start (conversation busy or gone)
    turn = store.turn_by_stream(member.stream_id)
    if turn is None:
        return STATUS_FAILED
    return turn.status


def stored_status(store: Store, job: FanOutJob | None) -> str:
    """The status of ``job`` from its members' stored turns (``failed`` for an unknown job)."""
    if job is None:
        return JOB_FAILED
    return job_status([member_status(store, m) for m in job.members])
