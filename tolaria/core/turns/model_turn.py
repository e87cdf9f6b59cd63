"""The runner's side of a direct model chat (protocol ``openai-chat``): one turn of a
``ChatHelper``, registered in the process registry like any agent run, so ``abort`` (Stop) cancels
it: the in-flight request is closed and a running command's tree is killed. ``done`` is last.

The conversation history is saved under the data dir by the session id the ``init`` event
reports (tolaria/core/modelchat/history.py), so a later ``RunRequest`` with that ``session_id``
continues it, in this process or after a restart. The API key comes from the manifest's
environment variable or the system keyring (tolaria/core/modelchat/keys.py) and is never saved.
``RunRequest.model`` overrides the manifest's model for one turn. See
docs/adr/0005-direct-model-chats.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from pathlib import Path

from tolaria.core.cancel import CancellationToken
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_ERROR,
    Diagnostic,
    Done,
    Error,
    EventCallback,
    Init,
)
from tolaria.core.modelchat.client import NOTICE, ChatHelper
from tolaria.core.modelchat.command_approval import CommandApproval
from tolaria.core.modelchat.history import ChatHistoryStore, HistoryError, SavedChat
from tolaria.core.modelchat.keys import missing_key_message, resolve_api_key
from tolaria.core.process.registry import FINISHING, RUNNING, STOPPING, ProcessRegistry, Run
from tolaria.core.turns.request import RunRequest
from tolaria.core.turns.spawn import build_env

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
        sid, manifest = self.run.stream_id, self.manifest
        if self.run.stop_requested:
            return self._done(STOP_CANCELLED)
        cwd = self.request.cwd or os.getcwd()
        if not Path(cwd).is_dir():
            return self._fail(f"working folder {cwd} does not exist or is not a folder")
        env = build_env(manifest, sid, self.request.env)
        key = None
        if manifest.api_key_env:
            # From the variable, else the keyring (a blocking call: it may ask a daemon).
            key = await asyncio.to_thread(resolve_api_key, manifest, env)
            env.pop(manifest.api_key_env, None)  # tools never see the key
            if not key:
                return self._fail(missing_key_message(manifest))
        if self.registry.transition(self.run, RUNNING) == STOPPING:
            return self._done(STOP_CANCELLED)
        model = self.request.model or manifest.model
        # "safe": each run_command asks the user first (tolaria/core/modelchat/command_approval.py).
        approval = (CommandApproval(sid, self.request.on_permission, self.emit)
                    if (self.request.permission_mode or manifest.permissions) == "safe" else None)
        helper = ChatHelper(manifest.base_url, model, api_key=key, cwd=cwd,
                            stream_id=sid,
                            on_event=approval.on_event if approval is not None else self.emit,
                            cancellation=CancellationToken(),
                            max_iterations=manifest.max_iterations, env=env,
                            grace_s=self.grace_s, system_prompt=_system_prompt(cwd))
        if approval is not None:
            approval.redact = helper.redact_for_user
            helper.toolbox.approve_command = approval
        store = ChatHistoryStore()
        saved = self._load(store)
        if saved is not None:
            session = str(self.request.session_id)
            helper.messages = saved.messages
            helper.use_tools = helper.use_tools and model not in saved.no_tools_models
        else:
            session, saved = uuid.uuid4().hex, SavedChat()
        self.emit(Init(sid, agent=manifest.id, session_id=session))
        stopper = asyncio.ensure_future(self.run.stop_event.wait())
        stopper.add_done_callback(lambda f: None if f.cancelled() else helper.cancel())
        try:
            reason = await helper.prompt(self.request.prompt, self.request.content_blocks)
        except asyncio.CancelledError:
            self.registry.force_stop(self.run)
            raise
        except ImportError as exc:
            reason = STOP_ERROR
            self.emit(Error(sid, message=f"model chats need the httpx package ({exc})"))
        except Exception as exc:  # a bug must still end the run with one done
            log.exception("model chat %s failed", sid)
            reason = STOP_ERROR
            detail = helper.redact_for_user(f"{type(exc).__name__}: {exc}")
            self.emit(Error(sid, message=f"{manifest.name}: {detail}"))
        finally:
            stopper.cancel()
            if helper.tools_rejected:
                saved.no_tools_models.append(model)
            saved.messages = helper.messages
            self._save(store, session, saved, key)
        if self.registry.transition(self.run, FINISHING) == STOPPING:
            reason = STOP_CANCELLED
        return self._done(reason)

    def _load(self, store: ChatHistoryStore) -> SavedChat | None:
        """The saved history of the requested session; None (with a note) when it is gone."""
        wanted = self.request.session_id
        if wanted is None:
            return None
        why = "it was not found"
        try:
            saved = store.load(wanted)
        except HistoryError as exc:
            saved, why = None, str(exc)
        if saved is None:
            # A notice: the user must know the model no longer sees the earlier turns.
            self.emit(Diagnostic(self.run.stream_id, source=NOTICE,
                                 message=f"the earlier model conversation cannot be continued "
                                         f"({why}); starting a new one"))
        return saved

    def _save(self, store: ChatHistoryStore, session: str, saved: SavedChat,
              key: str | None) -> None:
        try:
            store.save(session, saved, redact=key)
        except HistoryError as exc:
            log.warning("%s", exc)
            self.emit(Diagnostic(self.run.stream_id, source=NOTICE,
                                 message=f"{exc}; the next turn starts a new conversation"))


def _system_prompt(cwd: str) -> str:
    return (f"You are a coding assistant working in the folder {cwd}. Use the tools to read, "
            "search and run commands there; paths are relative to that folder.")
