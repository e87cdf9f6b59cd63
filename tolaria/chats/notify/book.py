"""The notification book: which facts become desktop notifications, and what their actions do.

Every fact of the window's runs comes here (a run ended, a permission question asked or
settled, the agent asked something, a run went silent) and the book answers with commands for
the desktop (``Show`` / ``Close``). Its rules:

- **once per event**: an event (a run's end, one question, one silence) is offered once; the
  same fact told twice (a view rebuilt, a second signal) sends nothing;
- **one per chat**: a chat's newer notice replaces the one it shows (``slot``);
- **never for the chat in view** while the window is active (``in_view``): the user sees it
  there; the chat coming into view closes its notice;
- **a question is answered once**: Allow / Deny of a notification answer only while the
  question is still open here; the window's answer (``permission_settled``) closes the
  notification, and an action that comes after it does nothing. The broker
  (tolaria/qt/permissions.py) applies the same rule to the agent's future, so whichever answer
  comes first wins;
- **a setting per kind** (``kinds``), and a master switch (``enabled``).

``pending_questions`` counts what waits for the user (open permission questions, questions
from the agent not yet seen): the window's title and the launcher badge show it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tolaria.chats.notify.notices import (
    ALLOW,
    DEFAULT_ACTION,
    DENY,
    FAILED,
    FINISHED,
    KINDS,
    LIMIT,
    PERMISSION,
    QUESTION,
    RESTART,
    STALL,
    STOP,
    Action,
    AnswerPermission,
    Close,
    Command,
    Intent,
    Notice,
    OpenChat,
    RestartRun,
    Show,
    StopRun,
    slot_of,
)
from tolaria.core.events import STOP_CANCELLED, STOP_END_TURN, STOP_ERROR
from tolaria.support.redact import redact_text

_BODY_CHARS = 200
_OPEN = Action(DEFAULT_ACTION, "Open")
_ENDINGS = {STOP_END_TURN: "finished", STOP_CANCELLED: "was stopped",
            STOP_ERROR: "ended with an error"}


@dataclass(frozen=True)
class _Question:
    conversation_id: int
    allow: str | None
    deny: str


def _short(text: str) -> str:
    line = " ".join(redact_text(text).split())
    return line if len(line) <= _BODY_CHARS else line[: _BODY_CHARS - 1] + "…"


class NotificationBook:
    def __init__(self, kinds: Iterable[str] = KINDS, *,
                 in_view: Callable[[int], bool] = lambda _conversation: False,
                 enabled: bool = True) -> None:
        self.kinds = frozenset(kinds)
        self.enabled = enabled
        self._in_view = in_view
        self._sent: set[str] = set()
        #: slot -> the notice it shows now.
        self._shown: dict[str, Notice] = {}
        #: (stream id, key) -> an open permission question.
        self._questions: dict[tuple[str, str], _Question] = {}
        #: stream id -> conversation of a question from the agent the user has not seen yet.
        self._agent_questions: dict[str, int] = {}

    # -- settings --------------------------------------------------------------------------
    def configure(self, kinds: Iterable[str], enabled: bool) -> list[Command]:
        """New settings; a shown notice of a kind now off is taken back."""
        self.kinds, self.enabled = frozenset(kinds), enabled
        return [self._close(slot) for slot, notice in list(self._shown.items())
                if not enabled or notice.kind not in self.kinds]

    # -- facts -----------------------------------------------------------------------------
    def run_finished(self, conversation_id: int, title: str, stream_id: str, stop_reason: str,
                     limit_text: str | None = None) -> list[Command]:
        """A run ended (``limit_text``: "stopped: $2.00 limit reached" when a limit stopped
        it). Its open questions and its silence are over with it."""
        for key in [k for k in self._questions if k[0] == stream_id]:
            del self._questions[key]
        slot = slot_of(conversation_id)
        if limit_text is not None:
            kind, body = LIMIT, limit_text[:1].upper() + limit_text[1:]
        elif stop_reason == STOP_ERROR:
            kind, body = FAILED, "The run ended with an error."
        else:
            kind, body = FINISHED, f"The run {_ENDINGS.get(stop_reason, f'ended ({stop_reason})')}."
        summary = {LIMIT: f"“{title}” reached a limit", FAILED: f"“{title}” failed",
                   FINISHED: f"“{title}” {_ENDINGS.get(stop_reason, 'ended')}"}[kind]
        shown = self._shown.get(slot)
        if kind == FINISHED and shown is not None and shown.kind == QUESTION \
                and shown.stream_id == stream_id:
            # The run ended on its question: that says more than "finished", and stays.
            self._sent.add(f"done:{stream_id}")
            return []
        commands = self._offer(Notice(slot, f"done:{stream_id}", kind, conversation_id,
                                      stream_id, summary, body, (_OPEN,)))
        if not commands and shown is not None and shown.stream_id == stream_id \
                and shown.kind in (PERMISSION, STALL):
            commands.append(self._close(slot))  # its question or silence is over
        return commands

    def permission_asked(self, conversation_id: int, title: str, stream_id: str, key: str,
                         tool_title: str, allow: str | None, deny: str) -> list[Command]:
        """A permission question: ``allow`` is the agent's allow-once option (None: it offers
        none), ``deny`` its reject option ("" rejects without one)."""
        self._questions[(stream_id, key)] = _Question(conversation_id, allow, deny)
        actions = (_OPEN, *((Action(ALLOW, "Allow"),) if allow is not None else ()),
                   Action(DENY, "Deny"))
        return self._offer(Notice(slot_of(conversation_id), f"ask:{stream_id}:{key}",
                                  PERMISSION, conversation_id, stream_id,
                                  f"“{title}” asks permission", _short(tool_title), actions))

    def permission_settled(self, stream_id: str, key: str) -> list[Command]:
        """The question ended (answered in the window or from a notification, cancelled): its
        notification closes; a later Allow / Deny of it does nothing."""
        question = self._questions.pop((stream_id, key), None)
        if question is None:
            return []
        slot = slot_of(question.conversation_id)
        shown = self._shown.get(slot)
        if shown is not None and shown.event == f"ask:{stream_id}:{key}":
            return [self._close(slot)]
        return []

    def agent_asked(self, conversation_id: int, title: str, stream_id: str, tool_id: str,
                    text: str) -> list[Command]:
        """The agent asks the user something (Claude's ``AskUserQuestion`` tool)."""
        if not self._in_view(conversation_id):
            self._agent_questions[stream_id] = conversation_id
        return self._offer(Notice(slot_of(conversation_id), f"question:{stream_id}:{tool_id}",
                                  QUESTION, conversation_id, stream_id,
                                  f"“{title}” asks you a question",
                                  _short(text) or "The agent waits for your answer.", (_OPEN,)))

    def stalled(self, conversation_id: int, title: str, stream_id: str, silence: int,
                after_s: float) -> list[Command]:
        """The run has said nothing for ``after_s`` (``silence``: which silence of the run)."""
        after = f"{after_s / 60:g} min" if after_s >= 60 else f"{after_s:.0f} s"
        return self._offer(Notice(
            slot_of(conversation_id), f"stall:{stream_id}:{silence}", STALL, conversation_id,
            stream_id, f"“{title}” is silent", f"No output for {after}.",
            (_OPEN, Action(STOP, "Stop"), Action(RESTART, "Restart"))))

    def resumed(self, stream_id: str) -> list[Command]:
        """The silent run spoke again: its stall notice is out of date."""
        for slot, notice in list(self._shown.items()):
            if notice.kind == STALL and notice.stream_id == stream_id:
                return [self._close(slot)]
        return []

    def viewed(self, conversation_id: int) -> list[Command]:
        """The chat is in view in the active window: its notice closes, its questions from the
        agent are seen."""
        for stream in [s for s, c in self._agent_questions.items() if c == conversation_id]:
            del self._agent_questions[stream]
        slot = slot_of(conversation_id)
        return [self._close(slot)] if slot in self._shown else []

    # -- the desktop's answers ---------------------------------------------------------------
    def invoked(self, slot: str, action: str) -> tuple[Intent | None, list[Command]]:
        """The user chose ``action`` on the notification of ``slot``: what to do (None: nothing
        any more) and the notification closes."""
        notice = self._shown.get(slot)
        if notice is None or action not in {a.key for a in notice.actions}:
            return None, []
        commands: list[Command] = [self._close(slot)]
        if action == DEFAULT_ACTION:
            return OpenChat(notice.conversation_id), commands
        if notice.kind == STALL:
            run: Intent = (StopRun if action == STOP else RestartRun)(notice.conversation_id,
                                                                      notice.stream_id)
            return run, commands
        key = notice.event.split(":", 2)[2]
        question = self._questions.pop((notice.stream_id, key), None)
        if question is None:  # answered in the window first: this action does nothing
            return None, commands
        option = question.allow if action == ALLOW else question.deny
        return AnswerPermission(notice.conversation_id, notice.stream_id, key,
                                option or ""), commands

    def dismissed(self, slot: str) -> None:
        """The desktop closed the notification of ``slot`` (expired, dismissed)."""
        self._shown.pop(slot, None)

    # -- state -----------------------------------------------------------------------------
    def pending_questions(self) -> int:
        return len(self._questions) + len(self._agent_questions)

    def shown(self, slot: str) -> Notice | None:
        return self._shown.get(slot)

    # -- inside ----------------------------------------------------------------------------
    def _offer(self, notice: Notice) -> list[Command]:
        if notice.event in self._sent:
            return []
        self._sent.add(notice.event)
        if not self.enabled or notice.kind not in self.kinds \
                or self._in_view(notice.conversation_id):
            return []
        self._shown[notice.slot] = notice
        return [Show(notice)]

    def _close(self, slot: str) -> Close:
        self._shown.pop(slot, None)
        return Close(slot)
