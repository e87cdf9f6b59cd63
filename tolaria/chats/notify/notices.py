"""A desktop notification as data, and what its actions ask of the app.

Kinds are the user's settings (``[notifications]``): a background chat finished or failed, a
permission question, a question from the agent, a stalled run, a limit reached. Each notice
belongs to one chat (its ``slot``): a newer notice of the same chat replaces it on screen
(``replaces_id``) instead of stacking a second one. ``event`` names what happened (a run's end,
one question): the same event is never notified twice.
"""

from __future__ import annotations

from dataclasses import dataclass

FINISHED = "finished"
FAILED = "failed"
PERMISSION = "permission"
QUESTION = "question"
STALL = "stall"
LIMIT = "limit"
#: Every kind, in the order Preferences lists them.
KINDS = (FINISHED, FAILED, PERMISSION, QUESTION, STALL, LIMIT)
#: How Preferences names each kind.
KIND_LABELS = {
    FINISHED: "A background chat finished",
    FAILED: "A background chat failed",
    PERMISSION: "An agent asks permission (Allow / Deny from the notification)",
    QUESTION: "An agent asks you a question",
    STALL: "A run is silent for a while (Stop / Restart from the notification)",
    LIMIT: "A run was stopped by a limit",
}

#: The freedesktop action key of a click on the notification's body.
DEFAULT_ACTION = "default"
ALLOW = "allow"
DENY = "deny"
STOP = "stop"
RESTART = "restart"


@dataclass(frozen=True)
class Action:
    key: str
    label: str


@dataclass(frozen=True)
class Notice:
    #: One notification on screen per slot (a chat): a newer notice replaces the older one.
    slot: str
    #: What happened (a run's end, one question): never notified twice.
    event: str
    kind: str
    conversation_id: int
    stream_id: str
    summary: str
    body: str
    #: The first is the click on the notification (``DEFAULT_ACTION``).
    actions: tuple[Action, ...] = ()


@dataclass(frozen=True)
class Show:
    """Put ``notice`` on screen (replacing what its slot shows)."""

    notice: Notice


@dataclass(frozen=True)
class Close:
    """Take the notification of ``slot`` off the screen."""

    slot: str


Command = Show | Close


@dataclass(frozen=True)
class OpenChat:
    conversation_id: int


@dataclass(frozen=True)
class AnswerPermission:
    conversation_id: int
    stream_id: str
    key: str
    #: "" rejects when the agent offers no reject choice (PermissionBroker.answer).
    option_id: str


@dataclass(frozen=True)
class StopRun:
    conversation_id: int
    stream_id: str


@dataclass(frozen=True)
class RestartRun:
    conversation_id: int
    stream_id: str


#: What an action of a notification asks the app to do.
Intent = OpenChat | AnswerPermission | StopRun | RestartRun


def slot_of(conversation_id: int) -> str:
    return f"chat-{conversation_id}"


#: Tools by which an agent asks the user something (Claude Code's ``AskUserQuestion``,
#: opencode's ``question``), compared without case and underscores.
QUESTION_TOOLS = frozenset({"askuserquestion", "question", "askuser", "askfollowupquestion"})


def question_text(tool_name: str, tool_input: object) -> str | None:
    """The question when ``tool_name`` is an agent asking the user ("" when it says none);
    None for every other tool."""
    if tool_name.replace("_", "").replace("-", "").lower() not in QUESTION_TOOLS:
        return None
    if isinstance(tool_input, dict):
        questions = tool_input.get("questions")
        if isinstance(questions, list) and questions and isinstance(questions[0], dict):
            return str(questions[0].get("question", ""))
        for key in ("question", "text", "prompt"):
            if isinstance(tool_input.get(key), str):
                return str(tool_input[key])
    return ""
