"""The prompt card and live tool cards as widgets: stacking, choices, secrets, restored state.

Real widgets, fed real events (the ACP mapper over the captured claude-agent-acp session) and a
real store; no agent process is needed here (tests/ui/test_permissions.py drives real ones).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot
from redact_cases import ENV, HARMLESS, LEAKS

from tolaria.core.events import Done, Event, ToolStart, ToolUpdate
from tolaria.core.permissions import PermissionChoice, PermissionRequest
from tolaria.core.store.db import Store
from tolaria.core.turns.acp.updates import UpdateMapper
from tolaria.ui.chat.chat_pane import ChatPane
from tolaria.ui.transcript.permission_card import PermissionCard
from tolaria.ui.transcript.pretty_input import MASK, pretty_input
from tolaria.ui.transcript.turn_view import Ending, TurnView

CAPTURE = Path(__file__).resolve().parent.parent / "fixtures" / "acp" / "acp_sleep_cancel.acp.jsonl"
SID = "ai-agent-stream-0123456789abcdef0123456789abcdef"
COMMAND = "echo started; sleep 300; echo finished"
ALL = (PermissionChoice("yes", "Allow", "allow_once"),
       PermissionChoice("always", "Always Allow", "allow_always"),
       PermissionChoice("no", "Reject", "reject_once"))


def request(title: str = "rm -rf build", tool_input: Any = None,
            choices: tuple[PermissionChoice, ...] = ALL) -> PermissionRequest:
    return PermissionRequest(SID, "t1", title, tool_input if tool_input is not None
                             else {"command": title}, choices, kind="execute")


def turn_view(qtbot: QtBot) -> TurnView:
    view = TurnView("do it", "Agent", SID)
    qtbot.addWidget(view)
    view.show()
    return view


def drain(view: TurnView) -> None:
    while view.drain(float("inf")):
        pass


def capture_events() -> list[Event]:
    mapper = UpdateMapper(SID)
    events: list[Event] = []
    for line in CAPTURE.read_text().splitlines():
        msg = json.loads(line)["msg"]
        if msg.get("method") == "session/update":
            events += mapper.feed(msg["params"]["update"])
    return events


def test_several_questions_stack_and_each_answers_for_itself(qtbot: QtBot) -> None:
    view = turn_view(qtbot)
    view.ask("k1", request("rm -rf build"))
    view.ask("k2", request("git push --force"))
    drain(view)
    first, second = view.permission_cards()
    assert (first.key, second.key) == ("k1", "k2")
    with qtbot.waitSignal(view.permission_answer_requested) as sent:
        second.buttons["allowOnceButton"].click()
    assert sent.args == [SID, "k2", "yes"]
    assert first.pending and not first._row.isHidden()
    second.buttons["rejectButton"].click()  # already answered: no second intent
    view.settle("k2", "allow_once")
    drain(view)
    assert second.outcome == "allow_once" and first.pending
    view.end(Ending("cancelled"))
    drain(view)
    assert first.outcome == "cancelled" and second.outcome == "allow_once"


def test_only_offered_choices_are_buttons(qtbot: QtBot) -> None:
    card = PermissionCard("k", request(choices=(PermissionChoice("ok", "Allow", "allow_once"),)))
    qtbot.addWidget(card)
    assert set(card.buttons) == {"allowOnceButton", "rejectButton"}
    with qtbot.waitSignal(card.answer_requested) as sent:
        card.buttons["rejectButton"].click()
    assert sent.args == ["k", ""]  # no reject choice offered: the answer is "cancelled"


def test_allowing_a_pending_tool_shows_it_running(qtbot: QtBot) -> None:
    view = turn_view(qtbot)
    view.enqueue(ToolStart(SID, tool_id="t1", name="Terminal", input={}))
    view.enqueue(ToolUpdate(SID, tool_id="t1", status="pending"))
    view.ask("k", request())
    drain(view)
    [tool] = view.tool_cards()
    assert tool.status == "pending"
    view.settle("k", "allow_once")
    drain(view)
    assert tool.status == "running"


def test_a_stream_of_updates_is_applied_once(qtbot: QtBot) -> None:
    view = turn_view(qtbot)
    view.enqueue(ToolStart(SID, tool_id="t1", name="Terminal", input={}))
    view.enqueue(ToolUpdate(SID, tool_id="t1", name="make", status="pending"))
    for n in range(200):  # partial output flooding in between two frames
        view.enqueue(ToolUpdate(SID, tool_id="t1", output=f"line {n}"))
    view.enqueue(ToolUpdate(SID, tool_id="t1", status="running"))
    assert len(view.queue) == 2
    drain(view)
    [tool] = view.tool_cards()
    assert (tool.title, tool.status, tool.output) == ("make", "running", "line 199")


def test_a_turn_that_fails_closes_its_open_question(qtbot: QtBot) -> None:
    view = turn_view(qtbot)
    view.ask("k", request())
    view.end(Ending("failed"))
    drain(view)
    assert view.permission_cards()[0].outcome == "closed"


def test_secrets_are_masked_and_long_input_is_cut(qtbot: QtBot) -> None:
    secret = "sk-live-abcdefghijklmnop1234"
    tool_input = {"command": f"curl -H 'Authorization: Bearer {secret}' https://x",
                  "env": {"API_KEY": "hunter2-value", "HOME": "/home/me"},
                  "note": f"OPENAI_API_KEY={secret} ghp_abcdefghijklmnopqrstuvwx"}
    card = PermissionCard("k", request(f"export TOKEN={secret}", tool_input))
    qtbot.addWidget(card)
    shown = card.input_label.text() + card.title + card.accessibleName()
    assert secret not in shown and "hunter2" not in shown and "ghp_abc" not in shown
    assert MASK in card.input_label.text() and "/home/me" in card.input_label.text()
    assert card.title == f"export TOKEN={MASK}"
    long = pretty_input({"lines": [f"line {n}" for n in range(500)]})
    assert long.endswith("more lines") and len(long.splitlines()) <= 25
    assert pretty_input({"command": "ls -la"}) == "ls -la"
    assert len(pretty_input("x" * 100_000)) < 4100


def test_every_secret_of_the_table_is_masked_on_the_card(qtbot: QtBot,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared table (tests/redact_cases.py) as a card's title and as its input."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    for leak in LEAKS:
        card = PermissionCard("k", request(leak.text, {"command": leak.text}))
        qtbot.addWidget(card)
        shown = card.input_label.text() + card.title + card.accessibleName()
        assert leak.secret not in shown, leak
        assert leak.kept in card.title and leak.kept in card.input_label.text(), leak
    for harmless in HARMLESS:
        card = PermissionCard("k", request(harmless, {"command": harmless}))
        qtbot.addWidget(card)
        assert (card.title, card.input_label.text()) == (harmless, harmless)


def test_tool_card_follows_the_claude_terminal_updates(qtbot: QtBot) -> None:
    view = turn_view(qtbot)
    events = capture_events()
    renamed = next(n for n, e in enumerate(events) if isinstance(e, ToolUpdate) and e.name)
    for event in events[:renamed]:
        view.enqueue(event)
    drain(view)
    [card] = view.tool_cards()
    assert card.title == "Terminal" and card.status == "pending"
    for event in events[renamed:]:  # the tool_call_update with the real command, usage
        view.enqueue(event)
    drain(view)
    assert card.title == COMMAND
    assert card.command == f"$ {COMMAND}"  # the header says what runs
    assert card.status == "pending"
    assert card.output == f"Run: {COMMAND}"
    view.end(Ending("cancelled"))
    drain(view)
    assert card.status == "cancelled"


def test_restored_transcript_shows_the_final_tool_state(qtbot: QtBot, tmp_path: Path) -> None:
    store = Store(tmp_path / "t.db")
    try:
        conversation = store.create_conversation("c", "claude-acp", str(tmp_path))
        store.start_turn(conversation.id, SID, "claude-acp", "RUN_SLEEP")
        for event in capture_events():
            store.append_event(event)
        store.append_event(Done(SID, stop_reason="cancelled", duration_ms=1200))
        history = [(turn, store.events(turn.id)) for turn in store.turns(conversation.id)]
    finally:
        store.close()
    pane = ChatPane(conversation.id, "Claude (ACP)")
    qtbot.addWidget(pane)
    pane.load_history(history, {})
    pane.transcript.flush_all()
    [view] = pane.turn_views()
    assert [(c.title, c.status) for c in view.tool_cards()] == [(COMMAND, "cancelled")]
