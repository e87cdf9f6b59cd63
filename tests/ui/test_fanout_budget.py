"""A fan-out job's budget (the dialog's "Budget of the whole job"): the sum over its members'
runs. Two real agents that keep calling tools (tests/fakes/spend_agent.py) share a budget of
tool calls; when it is spent both are stopped the normal way (trees gone, output kept), each
turn saying the job's budget was reached, the 80 % warning once in the whole job."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pytestqt.qtbot import QtBot
from ui.test_fanout import add_agent, fan_out, member_streams, wait_pane_done
from ui.uihelpers import StartApp, processes_of

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import Done, ToolStart
from tolaria.ui.fanout.fanout_dialog import FanOutDialog

SPEND_AGENT = Path(__file__).resolve().parents[1] / "fakes" / "spend_agent.py"


def spend_manifest(agent_id: str) -> Manifest:
    return Manifest(id=agent_id, name=f"Spend {agent_id[-1]}", protocol="opencode-json",
                    command=(sys.executable, str(SPEND_AGENT), "{prompt}"))


def test_a_job_budget_stops_every_member_when_it_is_spent(start_app: StartApp,
                                                          qtbot: QtBot) -> None:
    drv = start_app()
    add_agent(drv, spend_manifest("spend-a"))
    add_agent(drv, spend_manifest("spend-b"))
    drv.window.fan_out_action.trigger()
    dialog = drv.window.findChild(FanOutDialog, "fanOutDialog")
    assert dialog is not None
    dialog.budget.tool_calls.setValue(6)
    assert not dialog.budget.minutes.isVisible(), "time stays per run"
    if os.environ.get("TOLARIA_SHOTS"):
        dialog.grab().save(str(Path(os.environ["TOLARIA_SHOTS"]) / "fanout_budget.png"))
    dialog.hide()
    view = fan_out(drv, "spend", ["spend-a", "spend-b"])
    streams = member_streams(view)
    for pane in view.panes():
        wait_pane_done(qtbot, pane)
    calls = 0
    warnings = []
    for pane, stream_id in zip(view.panes(), streams, strict=True):
        assert processes_of(stream_id) == []
        turn = pane.turn_views()[-1]
        assert turn.status == "cancelled"
        assert turn.footer.text().startswith("Stopped: the job's 6 tool calls budget reached")
        assert "step 1" in turn.text()
        warnings += [label.text() for label in turn.findChildren(type(turn.footer),
                                                                 "limitNotice")]
        stored = drv.stored_turn(stream_id)
        events = drv.app.store.events(stored.id)
        calls += len([e for e in events if isinstance(e, ToolStart)])
        done = events[-1]
        assert isinstance(done, Done)
        assert (done.limit, done.limit_value) == ("job_tool_calls", 6)
    assert calls == 6, "the job ran exactly its budget of tool calls"
    assert warnings == ["⚠ 80 % of the job's 6 tool calls budget used"]
    qtbot.waitUntil(lambda: view.status == "cancelled")
