"""The notification book's rules (tolaria/chats/notify/book.py), without Qt or D-Bus."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tolaria.chats.notify.book import NotificationBook
from tolaria.chats.notify.notices import (
    ALLOW,
    DEFAULT_ACTION,
    DENY,
    FAILED,
    FINISHED,
    KINDS,
    LIMIT,
    RESTART,
    STALL,
    STOP,
    AnswerPermission,
    Close,
    OpenChat,
    RestartRun,
    Show,
    StopRun,
    question_text,
)
from tolaria.chats.notify.stall import StallWatch


def shown(commands: Sequence[Show | Close]) -> list[tuple[str, str, str]]:
    return [(c.notice.kind, c.notice.summary, c.notice.body) for c in commands
            if isinstance(c, Show)]


def test_a_background_run_end_is_notified_once_with_its_kind() -> None:
    book = NotificationBook()
    assert shown(book.run_finished(1, "Fix tests", "s1", "end_turn")) == [
        (FINISHED, "“Fix tests” finished", "The run finished.")]
    assert book.run_finished(1, "Fix tests", "s1", "end_turn") == []  # the same event again
    assert shown(book.run_finished(1, "Fix tests", "s2", "error"))[0][0] == FAILED
    [(kind, summary, body)] = shown(book.run_finished(
        2, "Refactor", "s3", "cancelled", "stopped: $2.00 limit reached"))
    assert (kind, summary, body) == (LIMIT, "“Refactor” reached a limit",
                                     "Stopped: $2.00 limit reached")


def test_one_notification_per_chat_replaced_not_stacked() -> None:
    book = NotificationBook()
    first = book.permission_asked(1, "Chat", "s1", "permission-1", "rm -rf build", "a1", "r1")
    second = book.run_finished(1, "Chat", "s1", "end_turn")
    assert [c.notice.slot for c in first + second if isinstance(c, Show)] == ["chat-1"] * 2
    notice = book.shown("chat-1")
    assert notice is not None and notice.kind == FINISHED


def test_the_chat_in_view_is_not_notified_and_viewing_closes_its_notice() -> None:
    viewing: set[int] = {1}
    book = NotificationBook(in_view=lambda c: c in viewing)
    assert book.run_finished(1, "Seen", "s1", "end_turn") == []
    assert book.permission_asked(1, "Seen", "s2", "k", "ls", "a", "r") == []
    assert book.pending_questions() == 1  # still waiting for an answer: counted
    assert shown(book.run_finished(2, "Other", "s3", "end_turn"))
    assert book.viewed(2) == [Close("chat-2")]
    assert book.viewed(2) == []


def test_a_setting_per_kind_and_the_master_switch() -> None:
    book = NotificationBook(kinds=set(KINDS) - {FINISHED})
    assert book.run_finished(1, "A", "s1", "end_turn") == []
    assert shown(book.run_finished(1, "A", "s2", "error"))
    assert book.configure(KINDS, enabled=False) == [Close("chat-1")]  # taken back
    assert book.permission_asked(2, "B", "s3", "k", "ls", "a", "r") == []


def test_allow_from_the_notification_answers_once() -> None:
    book = NotificationBook()
    [show] = book.permission_asked(3, "Clean", "s1", "permission-1", "rm -rf build",
                                   "allow-once", "reject-once")
    assert isinstance(show, Show)
    assert [a.key for a in show.notice.actions] == [DEFAULT_ACTION, ALLOW, DENY]
    assert book.pending_questions() == 1
    intent, commands = book.invoked("chat-3", ALLOW)
    assert intent == AnswerPermission(3, "s1", "permission-1", "allow-once")
    assert commands == [Close("chat-3")]
    assert book.invoked("chat-3", ALLOW) == (None, [])  # a second click: nothing
    # The broker then reports the question settled: nothing more to close.
    assert book.permission_settled("s1", "permission-1") == []
    assert book.pending_questions() == 0


def test_the_window_answers_first_then_the_notification_does_nothing() -> None:
    book = NotificationBook()
    book.permission_asked(3, "Clean", "s1", "permission-1", "rm", "allow-once", "")
    assert book.permission_settled("s1", "permission-1") == [Close("chat-3")]
    assert book.invoked("chat-3", DENY) == (None, [])


def test_deny_without_a_reject_choice_rejects_and_stale_questions_do_nothing() -> None:
    book = NotificationBook()
    book.permission_asked(1, "C", "s1", "k1", "rm", "allow", "")
    book.run_finished(5, "D", "s9", "end_turn")  # another chat: its own slot
    intent, _ = book.invoked("chat-1", DENY)
    assert intent == AnswerPermission(1, "s1", "k1", "")
    # A question replaced on screen by a newer notice of its chat is answered in the window.
    book.permission_asked(1, "C", "s2", "k2", "rm", "allow", "reject")
    book.stalled(1, "C", "s2", 1, 300)
    assert book.invoked("chat-1", ALLOW) == (None, [])  # not an action of what is shown
    assert book.pending_questions() == 1


def test_a_run_that_ends_drops_its_questions_and_closes_its_stall() -> None:
    book = NotificationBook(kinds=set(KINDS) - {FINISHED})
    book.permission_asked(1, "C", "s1", "k1", "rm", "a", "r")
    assert book.run_finished(1, "C", "s1", "cancelled") == [Close("chat-1")]
    assert book.pending_questions() == 0


@pytest.mark.parametrize(("action", "intent"), [(STOP, StopRun(4, "s1")),
                                                 (RESTART, RestartRun(4, "s1")),
                                                 (DEFAULT_ACTION, OpenChat(4))])
def test_stall_actions(action: str, intent: object) -> None:
    book = NotificationBook()
    [show] = shown(book.stalled(4, "Loop", "s1", 1, 300))
    assert show == (STALL, "“Loop” is silent", "No output for 5 min.")
    assert book.invoked("chat-4", action) == (intent, [Close("chat-4")])


def test_a_stall_notice_closes_when_the_run_speaks_again() -> None:
    book = NotificationBook()
    book.stalled(4, "Loop", "s1", 1, 300)
    assert book.resumed("s1") == [Close("chat-4")]
    assert book.stalled(4, "Loop", "s1", 1, 300) == []  # that silence was told
    assert shown(book.stalled(4, "Loop", "s1", 2, 42))  # a new one is


def test_questions_from_the_agent_are_pending_until_seen() -> None:
    book = NotificationBook()
    assert shown(book.agent_asked(2, "Plan", "s1", "t1", "Which database?")) == [
        ("question", "“Plan” asks you a question", "Which database?")]
    assert book.pending_questions() == 1
    # The run then ends on its question: the question stays on screen, not "finished".
    assert book.run_finished(2, "Plan", "s1", "end_turn") == []
    assert book.shown("chat-2") is not None
    book.viewed(2)
    assert book.pending_questions() == 0


def test_secrets_never_reach_a_notification() -> None:
    book = NotificationBook()
    [show] = book.permission_asked(1, "C", "s1", "k", "curl -H 'Authorization: Bearer "
                                   "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789'", "a", "r")
    assert isinstance(show, Show) and "abcdefghijklmnop" not in show.notice.body


def test_stall_watch_tells_each_silence_once_and_not_while_asking() -> None:
    watch = StallWatch(after_s=300)
    watch.started("s1", 7, now=0)
    assert watch.next_due(0) == 300
    assert watch.due(299) == []
    [stall] = watch.due(301)
    assert (stall.conversation_id, stall.stream_id, stall.silence) == (7, "s1", 1)
    assert watch.due(400) == []  # told once
    assert watch.output("s1", now=500) is True  # it spoke again
    watch.asking("s1", 510, open_question=True)
    assert watch.due(2000) == [] and watch.next_due(2000) is None  # the user is silent
    watch.asking("s1", 2000, open_question=False)
    assert [s.silence for s in watch.due(2301)] == [2]
    watch.ended("s1")
    assert watch.due(9999) == []


def test_which_tools_are_questions_from_the_agent() -> None:
    claude = {"questions": [{"question": "Which database?", "header": "DB",
                             "options": [{"label": "SQLite"}, {"label": "Postgres"}]}]}
    assert question_text("AskUserQuestion", claude) == "Which database?"
    assert question_text("question", {"question": "Go on?"}) == "Go on?"
    assert question_text("ask_user", None) == ""
    assert question_text("Bash", {"command": "ls"}) is None
