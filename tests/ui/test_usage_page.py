"""The Usage page and the context meter (issue 27 item 3), offscreen: figures from a real store
of generated turns, the chart's bars by agent, light and dark; View → Usage and the palette in
the real app; the meter following a real demo turn and a chat reopened."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QMenu, QWidget
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp

from tolaria.chats.usage import report, since_of
from tolaria.core.events import STOP_END_TURN, Done, Usage
from tolaria.core.store.db import Store
from tolaria.core.store.usage import BY_AGENT, BY_CHAT
from tolaria.ui import theme
from tolaria.ui.composer.context_meter import ContextMeter
from tolaria.ui.composer.status_line import StatusLine
from tolaria.ui.usage.chart import agent_color
from tolaria.ui.usage.usage_window import UsageWindow
from tolaria.ui.window.actions import plain_text

NAMES = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}
#: Where the pictures go when a person wants to look at them (unset: a test's tmp folder).
SHOTS = os.environ.get("TOLARIA_SHOTS")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "usage.sqlite3")
    noon = datetime.now().replace(hour=12, minute=0, second=0, microsecond=0)
    plan = {"claude": (900, 2.4), "codex": (1500, None), "gemini": (400, None)}
    titles = ["Fix the flaky parser test", "Refactor the store", "Write the release notes"]
    n = 0
    for days_ago in range(20):
        for agent, (scale, price) in plan.items():
            if (days_ago + len(agent)) % 3 == 0:
                continue
            chat = s.create_conversation(titles[n % 3] + f" #{n}", agent, None).id
            sid = f"ai-agent-stream-u{n}"
            s.start_turn(chat, sid, agent, "p",
                         started_at=(noon - timedelta(days=days_ago)).timestamp())
            size = scale * (1 + (days_ago * 7 + n) % 5)
            s.append_event(Usage(sid, input_tokens=size * 10, output_tokens=size,
                                 cache_read_tokens=size * 30,
                                 cost_usd=price * size / 1000 if price else None))
            s.append_event(Done(sid, stop_reason=STOP_END_TURN, duration_ms=size * 40))
            n += 1
    limits = [{"name": "five_hour", "used_percent": 38.0,
               "resets_at": time.time() + 3 * 3600 + 50, "status": "allowed"},
              {"name": "seven_day", "used_percent": 71.0, "resets_at": None, "status": None}]
    s.append_event(Usage("none"))  # an unknown stream: ignored
    chat = s.create_conversation("Plan check", "codex", None).id
    s.start_turn(chat, "ai-agent-stream-limits", "codex", "p")
    s.append_event(Usage("ai-agent-stream-limits", input_tokens=10, output_tokens=1,
                         rate_limits=limits))
    s.append_event(Done("ai-agent-stream-limits", stop_reason=STOP_END_TURN, duration_ms=10))
    yield s
    s.close()


def _shot(widget: QWidget, name: str, tmp_path: Path) -> Path:
    folder = Path(SHOTS) if SHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    assert widget.grab().save(str(path))
    return path


@pytest.mark.parametrize("look", ["light", "dark"])
def test_usage_page_shows_the_stores_figures(qtbot: QtBot, store: Store, tmp_path: Path,
                                             look: str) -> None:
    theme.apply_theme(look)
    try:
        page = UsageWindow()
        qtbot.addWidget(page)
        asked: list[tuple[str, int]] = []
        page.report_requested.connect(lambda by, days: asked.append((by, days)))
        page.request()
        assert asked == [(BY_CHAT, 30)]  # by chat, the last 30 days: the defaults
        usage = report(store, BY_AGENT, since_of("30d"))
        page.groups.blockSignals(True)
        page.groups.setCurrentIndex(1)  # By agent
        page.groups.blockSignals(False)
        page.show_report(usage, NAMES)
        page.resize(900, 760)
        page.show()
        qtbot.waitExposed(page)

        total = store.usage_total(since_of("30d"))
        assert page.turns_figure.value.text() == f"{total.turns:,}"
        assert page.cost_figure.value.text().startswith("$")
        assert page.table.rowCount() == 3
        first = page.table.item(0, 0)
        assert first is not None and first.text() == "Codex"  # most tokens first
        assert page.agents() == ["codex", "claude", "gemini"]
        assert len(page.chart.days) == 30 and page.chart.days[-1].day == \
            datetime.now().date().isoformat()
        assert "Codex · 5-hour limit: 38 % used, resets in 3 h" in page.limits.text()
        assert "weekly limit: 71 % used" in page.limits.text()
        bars = page.limit_bars.rows  # drawn as bars, the words beside them
        assert [(r.caption, r.used) for r in bars] == [("Codex · 5-hour limit", 0.38),
                                                      ("Codex · weekly limit", 0.71)]
        assert page.limit_bars.isVisible() and page.limits.isHidden()

        # the newest bar is drawn in the agents' colours, stacked
        image = page.chart.grab().toImage()
        slot = page.chart._slot(len(page.chart.days) - 1)
        x = int(slot.center().x())
        seen = {image.pixelColor(x, y).name() for y in range(image.height())}
        colours = {agent_color(a, page.agents(), theme.is_dark()).name() for a in page.agents()}
        assert seen & colours, "a bar in an agent's colour"
        background = page.chart.palette().color(page.chart.backgroundRole())
        assert QColor(background).name() in seen or len(seen) > 2

        page.metric_box.setCurrentIndex(1)  # cost: only Claude reports one
        assert page.chart.measure == "cost"
        assert page.chart.describe(page.chart.days[-1]).startswith(page.chart.days[-1].day)
        page.metric_box.setCurrentIndex(0)
        _shot(page, f"usage-page-{look}.png", tmp_path)
    finally:
        theme.apply_theme("light")


def test_usage_page_without_turns(qtbot: QtBot, tmp_path: Path) -> None:
    empty = Store(tmp_path / "empty.sqlite3")
    try:
        page = UsageWindow()
        qtbot.addWidget(page)
        page.show_report(report(empty, BY_CHAT, since_of("7d")), NAMES)
        assert page.table.rowCount() == 0 and page.cost_figure.value.text() == "—"
        assert "No CLI has reported" in page.limits.text() and page.limit_bars.rows == []
        assert len(page.chart.days) == 7 and page.chart.peak() == 0
    finally:
        empty.close()


@pytest.mark.parametrize("look", ["light", "dark"])
def test_context_meter(qtbot: QtBot, tmp_path: Path, look: str) -> None:
    theme.apply_theme(look)
    try:
        meter = ContextMeter()
        qtbot.addWidget(meter)
        assert meter.isHidden() and meter.text == ""
        meter.feed(Usage("s", input_tokens=5, output_tokens=5))  # says nothing of the context
        assert meter.isHidden()
        meter.feed(Usage("s", context_tokens=168_000))  # a turn's message, before its result
        assert meter.text == "168k in context" and meter.fraction is None
        meter.feed(Usage("s", context_tokens=168_000, context_window=200_000,
                         rate_limits=[{"name": "five_hour", "used_percent": 20.0,
                                       "resets_at": None, "status": "allowed"}]))
        assert meter.text == "168k / 200k" and meter.fraction == pytest.approx(0.84)
        assert meter.bar_color() == theme.warning_color()  # past 80 %
        assert "Context: 168,000 of 200,000 tokens (84 %)" in meter.toolTip()
        assert "5-hour limit: 20 % used" in meter.toolTip()
        meter.feed(Usage("s", context_tokens=42_000))  # compacted: the window stays known
        assert meter.text == "42k / 200k" and meter.bar_color() == theme.accent()
        meter.clear()
        assert meter.isHidden()

        line = StatusLine()  # as under the composer, at 84 %
        qtbot.addWidget(line)
        line.set_idle("Claude Code", "Completed in 41.2 s · 3,310 in / 912 out tokens · $0.0934")
        line.context.feed(Usage("s", context_tokens=168_000, context_window=200_000))
        line.resize(720, 26)
        line.show()
        qtbot.waitExposed(line)
        assert line.context.isVisible() and line.context.width() >= line.context.sizeHint().width()
        _shot(line, f"context-meter-{look}.png", tmp_path)
    finally:
        theme.apply_theme("light")


def test_view_usage_and_the_meter_in_the_app(start_app: StartApp, qtbot: QtBot,
                                             tmp_path: Path) -> None:
    drv = start_app()
    window = drv.window
    action = window.usage_action
    assert plain_text(action) == "Usage" and action in window.registry.actions()
    view_menu = window.view_menu
    assert isinstance(view_menu, QMenu) and action in view_menu.actions()
    drv.send("list the files")
    drv.wait_finished()
    meter = drv.pane.status_line.context
    qtbot.waitUntil(lambda: meter.fraction is not None)  # the demo says its window, as Claude
    assert meter.context_window == 200_000 and meter.text.endswith("/ 200k")

    action.trigger()
    page = window.usage_window
    assert page is not None
    qtbot.waitUntil(lambda: page.report is not None)
    assert page.isVisible() and page.report is not None and page.report.total.turns == 1
    assert page.table.rowCount() == 1
    first = page.table.item(0, 0)
    assert first is not None and first.text().startswith("list the files  ·  Demo agent")
    page.groups.setCurrentIndex(2)  # By day: asked again, answered at once
    assert page.report.by == "day" and page.table.rowCount() == 1
    drv.send("and again")  # a run that ends while the page is open is counted at once
    drv.wait_finished()
    qtbot.waitUntil(lambda: page.report is not None and page.report.total.turns == 2)
    if SHOTS:
        window.resize(1000, 640)
        assert window.grab().save(str(Path(SHOTS) / "window-with-meter.png"))

    # the chat opened again: the meter comes back from the stored turn
    conversation = drv.pane.conversation_id
    drv.app.controller.open_conversation(conversation)
    qtbot.waitUntil(lambda: drv.pane.status_line.context.fraction is not None)
