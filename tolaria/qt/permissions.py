"""Permission questions of running turns, asked in the chat and answered by the user.

The core asks through ``RunRequest.on_permission`` (an ACP agent's ``session/request_permission``,
or a model chat's ``run_command`` in "safe" mode). The broker shows the question through the
bridge (``permission_requested``) and waits; the chat's prompt card emits the user's choice as an
intent, and the controller hands it to ``answer``, which resolves the core's future on the run's
loop. Stop cancels the waiting question (the core cancels the callback): the card then shows
"cancelled". Every end of a question is a ``permission_settled`` fact.

Questions are state, not only signals (issue 22 item 4): each is kept with its turn in the store
(``PermissionAsked``, then ``PermissionSettled``), so a view rebuilt while it is open (a search
jump and back, the chat opened in another pane) shows it again and can answer it. It is answered
once: a second answer (another card of the same question, a late click) is ignored, no error.

"Allow always" is remembered per conversation, in memory only (never stored: a restart of
Tolaria asks again): the next question of the same tool kind in that conversation is answered
at once with the agent's allow-always choice (or allow once), and shown as answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass

from tolaria.core.events import PermissionSettled
from tolaria.core.permissions import PermissionCallback, PermissionRequest, asked_event
from tolaria.core.store.db import Store
from tolaria.core.store.write_errors import WRITE_ERRORS
from tolaria.qt.bridge import Bridge

OUTCOME_ALLOW_ONCE = "allow_once"
OUTCOME_ALLOW_ALWAYS = "allow_always"
OUTCOME_REJECT = "reject"
#: Answered by an earlier "Allow always" of the same conversation, without asking.
OUTCOME_REMEMBERED = "remembered"
OUTCOME_CANCELLED = "cancelled"
#: Kinds too vague to stand for one tool: "allow always" is then remembered by title.
_VAGUE_KINDS = ("", "other")


def always_key(request: PermissionRequest) -> str:
    """What an "allow always" covers: the tool's kind (e.g. every ``execute``), or its title."""
    return f"kind:{request.kind}" if request.kind not in _VAGUE_KINDS else f"title:{request.title}"


@dataclass
class _Question:
    conversation_id: int
    request: PermissionRequest
    answer: asyncio.Future[str | None]


class PermissionBroker:
    def __init__(self, bridge: Bridge, store: Store | None = None) -> None:
        self.bridge = bridge
        self.store = store
        self._open: dict[str, _Question] = {}
        self._always: dict[int, set[str]] = {}
        self._keys = itertools.count(1)
        if store is not None:
            # Connected before any view (the controller is made before the window): a page
            # read in reaction to the question already finds it in the store.
            bridge.permission_requested.connect(self._on_bridge_permission_requested)
            bridge.permission_settled.connect(self._on_bridge_permission_settled)

    def _on_bridge_permission_requested(self, _stream_id: str, key: str, request: object) -> None:
        """Keep the question with its turn, committed at once: every view built later (a search
        jump, a reopened chat, the next start) shows it again, open or as it ended."""
        if self.store is not None and isinstance(request, PermissionRequest):
            self.store.append_event(asked_event(key, request))
            with contextlib.suppress(*WRITE_ERRORS):  # in write_error; the flusher retries
                self.store.flush()

    def _on_bridge_permission_settled(self, stream_id: str, key: str, outcome: str) -> None:
        if self.store is not None:
            self.store.append_event(PermissionSettled(stream_id, key=key, outcome=outcome))
            with contextlib.suppress(*WRITE_ERRORS):
                self.store.flush()

    def is_open(self, stream_id: str, key: str) -> bool:
        question = self._open.get(key)
        return question is not None and question.request.stream_id == stream_id

    def hook(self, conversation_id: int) -> PermissionCallback:
        """The ``on_permission`` callback for a turn of this conversation."""
        async def ask(request: PermissionRequest) -> str | None:
            return await self.ask(conversation_id, request)
        return ask

    def remembered(self, conversation_id: int) -> frozenset[str]:
        return frozenset(self._always.get(conversation_id, ()))

    def pending(self, stream_id: str | None = None) -> list[str]:
        """Keys of the questions still waiting (of one stream, or all)."""
        return [key for key, q in self._open.items()
                if stream_id is None or q.request.stream_id == stream_id]

    async def ask(self, conversation_id: int, request: PermissionRequest) -> str | None:
        key = f"permission-{next(self._keys)}"
        stream_id = request.stream_id
        if always_key(request) in self._always.get(conversation_id, ()):
            choice = request.choice("allow_always", "allow_once")
            if choice is not None:
                if self.bridge.show_permission(stream_id, key, request):
                    self.bridge.permission_settled.emit(stream_id, key, OUTCOME_REMEMBERED)
                return choice.option_id
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._open[key] = _Question(conversation_id, request, answer)
        if not self.bridge.show_permission(stream_id, key, request):
            del self._open[key]
            return None  # the run is stopping or over: nobody will see the question
        try:
            return await answer
        except asyncio.CancelledError:  # Stop: the core no longer waits for this answer
            if self._open.pop(key, None) is not None:
                self.bridge.permission_settled.emit(stream_id, key, OUTCOME_CANCELLED)
            raise
        finally:
            self._open.pop(key, None)

    def answer(self, stream_id: str, key: str, option_id: str) -> bool:
        """The user chose ``option_id`` ("" to reject when the agent offers no reject choice).

        False when the question is no longer open (answered elsewhere, or cancelled)."""
        question = self._open.get(key)
        if question is None or question.request.stream_id != stream_id:
            return False
        del self._open[key]
        request = question.request
        choice = next((c for c in request.choices if c.option_id == option_id), None)
        if choice is not None and choice.kind == "allow_always":
            self._always.setdefault(question.conversation_id, set()).add(always_key(request))
        outcome = (choice.kind if choice is not None and choice.kind.startswith("allow_")
                   else OUTCOME_REJECT)
        _resolve(question.answer, choice.option_id if choice is not None else None)
        self.bridge.permission_settled.emit(stream_id, key, outcome)
        return True

    def close_stream(self, stream_id: str) -> None:
        """The run ended: a question it left open is closed as cancelled."""
        for key in self.pending(stream_id):
            question = self._open.pop(key)
            _resolve(question.answer, None)
            self.bridge.permission_settled.emit(stream_id, key, OUTCOME_CANCELLED)

    def forget(self, conversation_id: int) -> None:
        """The conversation was deleted: its "allow always" answers go with it."""
        self._always.pop(conversation_id, None)


def _resolve(future: asyncio.Future[str | None], value: str | None) -> None:
    """Answer the core's future on its own loop (the run's), never twice."""
    def settle() -> None:
        if not future.done():
            future.set_result(value)
    future.get_loop().call_soon_threadsafe(settle)
