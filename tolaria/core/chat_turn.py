"""The runner's side of a direct model chat (protocol ``openai-chat``): one turn of a
``ChatHelper``, registered in the process registry like any agent run, so ``abort`` (Stop) cancels
it: the in-flight request is closed and a running command's tree is killed. ``done`` is last.

The conversation history is kept in this process by the session id the ``init`` event reports,
so a later ``RunRequest`` with that ``session_id`` continues it. See
docs/adr/0005-direct-model-chats.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tolaria.core.cancel import CancellationToken
from tolaria.core.command_approval import CommandApproval
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_ERROR,
    Diagnostic,
    Done,
    Error,
    EventCallback,
    Init,
)
from tolaria.core.openai_chat import ChatHelper
from tolaria.core.registry import FINISHING, RUNNING, STOPPING, ProcessRegistry, Run

if TYPE_CHECKING:
    from tolaria.core.runner import RunRequest

#: History of chats run through the runner, by the session id their ``init`` event reported.
_SESSIONS: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
_MAX_SESSIONS = 64

log = logging.getLogger(__name__)


class ChatTurn:
    """One runner turn of a model chat: registered like any run, so ``abort`` stops it."""

    def __init__(self, run: Run, request: RunRequest, emit: EventCallback,
                 registry: ProcessRegistry, grace_s: float) -> None:
        self.run = run
        self.request = request
        self.manifest = request.manifest
        self.emit = emit
        self.registry = registry
        self.grace_s = grace_s
        self.started = time.monotonic()

    def _done(self, stop_reason: str) -> Done:
        return Done(self.run.stream_id, stop_reason=stop_reason,
                    duration_ms=int((time.monotonic() - self.started) * 1000))

    def _fail(self, message: str) -> Done:
        self.emit(Error(self.run.stream_id, message=message))
        return self._done(STOP_ERROR)

    async def execute(self) -> Done:
        from tolaria.core.agent_process import build_env

        sid, manifest = self.run.stream_id, self.manifest
        if self.run.stop_requested:
            return self._done(STOP_CANCELLED)
        cwd = self.request.cwd or os.getcwd()
        if not Path(cwd).is_dir():
            return self._fail(f"working folder {cwd} does not exist or is not a folder")
        env = build_env(manifest, sid, self.request.env)
        key = None
        if manifest.api_key_env:
            key = env.pop(manifest.api_key_env, None)  # tools never see the key
            if not key:
                return self._fail(f"{manifest.name}: set the environment variable "
                                  f"{manifest.api_key_env} to your API key")
        if self.registry.transition(self.run, RUNNING) == STOPPING:
            return self._done(STOP_CANCELLED)
        # "safe": each run_command asks the user first (tolaria/core/command_approval.py).
        approval = (CommandApproval(sid, self.request.on_permission, self.emit)
                    if manifest.permissions == "safe" else None)
        helper = ChatHelper(manifest.base_url, manifest.model, api_key=key, cwd=cwd,
                            stream_id=sid,
                            on_event=approval.on_event if approval is not None else self.emit,
                            cancellation=CancellationToken(),
                            max_iterations=manifest.max_iterations, env=env,
                            grace_s=self.grace_s, system_prompt=_system_prompt(cwd))
        if approval is not None:
            approval.redact = helper.redact
            helper.toolbox.approve_command = approval
        wanted = self.request.session_id
        if wanted is not None and wanted in _SESSIONS:
            session = wanted
            helper.messages = list(_SESSIONS[session])
        else:
            session = uuid.uuid4().hex
            if wanted is not None:
                self.emit(Diagnostic(sid, source="tolaria",
                                     message="the earlier model conversation is no longer in "
                                             "memory (Tolaria restarted); starting a new one"))
        self.emit(Init(sid, agent=manifest.id, session_id=session))
        stopper = asyncio.ensure_future(self.run.stop_event.wait())
        stopper.add_done_callback(lambda f: None if f.cancelled() else helper.cancel())
        try:
            reason = await helper.prompt(self.request.prompt)
        except asyncio.CancelledError:
            self.registry.force_stop(self.run)
            raise
        except ImportError as exc:
            reason = STOP_ERROR
            self.emit(Error(sid, message=f"model chats need the httpx package ({exc})"))
        except Exception as exc:  # a bug must still end the run with one done
            log.exception("model chat %s failed", sid)
            reason = STOP_ERROR
            detail = helper.redact(f"{type(exc).__name__}: {exc}")
            self.emit(Error(sid, message=f"{manifest.name}: {detail}"))
        finally:
            stopper.cancel()
            _SESSIONS[session] = helper.messages
            _SESSIONS.move_to_end(session)
            while len(_SESSIONS) > _MAX_SESSIONS:
                _SESSIONS.popitem(last=False)
        if self.registry.transition(self.run, FINISHING) == STOPPING:
            reason = STOP_CANCELLED
        return self._done(reason)


def _system_prompt(cwd: str) -> str:
    return (f"You are a coding assistant working in the folder {cwd}. Use the tools to read, "
            "search and run commands there; paths are relative to that folder.")
