"""The error card puts the actionable hint above the agent's raw text; retries are said aloud."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp

from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.events import Error
from tolaria.core.turns.diagnose import AUTH
from tolaria.ui.transcript.blocks import ErrorCard, RetryNotice
from tolaria.ui.transcript.turn_view import TurnView

TESTS = Path(__file__).resolve().parents[1]


def test_the_hint_is_shown_above_the_raw_message(qtbot: QtBot) -> None:
    card = ErrorCard("unexpected status 401 Unauthorized: Incorrect API key provided", [],
                     hint="Codex rejected the API key: set OPENAI_API_KEY or run `codex login`.")
    qtbot.addWidget(card)
    card.show()
    qtbot.waitExposed(card)
    hint = card.findChild(QLabel, "errorHint")
    raw = card.findChild(QLabel, "errorMessage")
    assert hint is not None and raw is not None
    assert hint.isVisible() and raw.isVisible()
    assert hint.text().startswith("Codex rejected the API key")
    assert "401 Unauthorized" in raw.text(), "the raw text is kept"
    assert hint.geometry().bottom() <= raw.geometry().top()


def test_without_a_hint_the_card_is_as_before(qtbot: QtBot) -> None:
    card = ErrorCard("something odd", ["stderr line"])
    qtbot.addWidget(card)
    card.show()
    qtbot.waitExposed(card)
    assert not card.hint_label.isVisible()
    assert card.message == "something odd"


def test_a_turn_builds_the_card_from_the_error_event(qtbot: QtBot) -> None:
    view = TurnView("hi", "Codex", "ai-agent-stream-hint")
    qtbot.addWidget(view)
    view.enqueue(Error("ai-agent-stream-hint", message="401", category=AUTH, hint="Set the key."))
    view.drain(deadline=float("inf"))
    view.show()
    qtbot.waitExposed(view)
    [card] = view.error_cards()
    assert card.hint_label.isVisible() and card.hint_label.text() == "Set the key."


def test_a_retrying_agent_is_cut_off_and_the_window_says_why(
        start_app: StartApp, home: Path) -> None:
    (home / "settings.toml").write_text("[behaviour]\nretry_limit_seconds = 1\n")
    drv = start_app()
    assert drv.app.controller.retry_limit_s == 1
    drv.use_agent(Manifest(
        id="codex", name="Codex", protocol="codex-exec-json",
        command=(sys.executable, str(TESTS / "fakes" / "retry_agent.py"),
                 str(TESTS / "fixtures" / "codex" / "codex_unreach.jsonl"), "{prompt}"),
        stop=StopPolicy(polite="sigint", polite_window_ms=300)))
    drv.send("hello?")
    turn = drv.wait_finished()
    assert turn.status == "failed"
    notices = turn.findChildren(RetryNotice)
    assert len(notices) == 1 and notices[0].text().startswith("Codex is retrying: Reconnecting")
    [card] = turn.error_cards()
    assert card.message.startswith("Codex could not reach the model for 1 s (Reconnecting...")
    drv.qtbot.waitUntil(card.hint_label.isVisible)  # shown with the card's next layout pass
    assert card.hint_label.text().startswith("Codex could not reach the model: check your network")
