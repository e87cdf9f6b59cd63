"""Fan-out jobs (issue 6, item 6): one prompt to several agents, side by side; stop one or all;
each member keeps its output and its own status; the job reads ``cancelled`` when stopped."""

from __future__ import annotations

import pytest
from helpers import fake_manifest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QPushButton, QSplitter
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, processes_of

from tolaria.chats.fanout import FanOutJob, job_status
from tolaria.core.adapters.manifest import Manifest
from tolaria.ui.chat.chat_pane import ChatPane
from tolaria.ui.fanout.fanout_dialog import FanOutDialog
from tolaria.ui.fanout.fanout_view import FanOutView


def add_agent(drv: AppDriver, manifest: Manifest) -> None:
    """Make ``manifest`` known, as a user adapter under TOLARIA_HOME/adapters would be."""
    drv.app.adapters.manifests[manifest.id] = manifest
    drv.window.set_manifests(list(drv.app.adapters.manifests.values()))


def fan_out(drv: AppDriver, prompt: str, agents: list[str]) -> FanOutView:
    before = set(drv.window.fan_out_views)
    drv.window.fan_out_action.trigger()
    dialog = drv.window.findChild(FanOutDialog, "fanOutDialog")
    assert dialog is not None and dialog.isVisible() and not dialog.isModal()
    dialog.set_checked(agents)
    dialog.prompt.setPlainText(prompt)
    assert sorted(dialog.selected_agents()) == sorted(agents)
    ask = dialog.findChild(QPushButton, "fanOutAskButton")
    assert ask is not None and ask.isEnabled()
    ask.click()
    assert not dialog.isVisible()
    (job_id,) = set(drv.window.fan_out_views) - before
    view = drv.window.fan_out_views[job_id]
    assert view.objectName() == "fanOutView" and view.isVisible()
    assert isinstance(view.findChild(QSplitter, "fanOutPanes"), QSplitter)
    return view


def stop_button(pane: ChatPane) -> QPushButton:
    assert pane.button.objectName() == "stopButton"
    return pane.button


def member_streams(view: FanOutView) -> list[str]:
    streams = [m.stream_id for m in view.job.members]
    assert all(streams)
    return [s for s in streams if s]


def wait_pane_done(qtbot: QtBot, pane: ChatPane) -> None:
    qtbot.waitUntil(lambda: pane.running_stream is None, timeout=15_000)
    turn = pane.turn_views()[-1]
    qtbot.waitUntil(lambda: turn.status != "running" and not turn.busy, timeout=15_000)


def test_job_status_rules() -> None:
    assert job_status(["running", "completed"]) == "running"
    assert job_status(["cancelled", "completed"]) == "cancelled"
    assert job_status(["failed", "failed"]) == "failed"
    assert job_status(["failed", "completed"]) == "completed"
    assert job_status(["completed", "completed"]) == "completed"


def test_shortcut_opens_a_non_modal_dialog_listing_enabled_agents(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    add_agent(drv, fake_manifest("normal"))
    assert drv.window.fan_out_action.shortcut().toString() == "Ctrl+Shift+N"
    drv.window.fan_out_action.trigger()
    dialog = drv.window.findChild(FanOutDialog, "fanOutDialog")
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible)
    assert QApplication.activeModalWidget() is None
    listed = [dialog.agents.item(r).data(Qt.ItemDataRole.UserRole)
              for r in range(dialog.agents.count())]
    assert "demo" in listed and "fake-normal" in listed
    ask = dialog.findChild(QPushButton, "fanOutAskButton")
    assert ask is not None and not ask.isEnabled()  # nothing chosen yet
    dialog.set_agents([("demo", "Demo", True), ("missing", "Missing (not installed)", False)])
    dialog.set_checked(["demo", "missing"])
    dialog.prompt.setPlainText("hello")
    assert dialog.selected_agents() == ["demo"]  # an agent that is not installed is not usable
    assert ask.isEnabled()
    dialog.hide()


def test_fan_out_stop_one_keeps_partial_output_and_job_reads_cancelled(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    add_agent(drv, fake_manifest("tool"))
    view = fan_out(drv, "compare your answers", ["demo", "fake-tool"])
    demo_pane, fake_pane = view.panes()
    demo_stream, fake_stream = member_streams(view)
    assert demo_stream != fake_stream
    assert view.status == "running" and "Running" in view.header.text()
    # Both are real runs, side by side, each in its own new conversation.
    qtbot.waitUntil(lambda: "I'll run a tool." in fake_pane.turn_views()[-1].text(),
                    timeout=10_000)
    wait_pane_done(qtbot, demo_pane)  # the quick demo finishes on its own
    assert demo_pane.turn_views()[-1].status == "completed"
    assert view.status == "running", "one member still runs"

    stop_button(fake_pane).click()
    wait_pane_done(qtbot, fake_pane)
    assert processes_of(fake_stream) == []
    fake_turn = fake_pane.turn_views()[-1]
    assert fake_turn.status == "cancelled"
    assert "I'll run a tool." in fake_turn.text(), "partial output stays"
    qtbot.waitUntil(lambda: view.status == "cancelled")
    assert "Stopped" in view.header.text()
    stop_job = view.findChild(QPushButton, "stopJobButton")
    assert stop_job is not None and not stop_job.isEnabled()

    assert drv.stored_turn(demo_stream).status == "completed"
    assert drv.stored_turn(fake_stream).status == "cancelled"
    titles = {m.agent: drv.stored_conversation(m.conversation_id).title
              for m in view.job.members}
    assert titles["demo"].startswith("compare your answers · ")
    assert titles["fake-tool"] == "compare your answers · Fake agent (tool)"
    # Ordinary conversations, in the sidebar too.
    sidebar_titles = [drv.window.sidebar.list.item(r).text()
                      for r in range(drv.window.sidebar.list.count())]
    assert titles["fake-tool"] in sidebar_titles
    assert drv.app.fanout.status(view.job.job_id) == "cancelled"


def test_stop_all_in_job_stops_only_the_jobs_runs(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    add_agent(drv, fake_manifest("tool"))
    other_pane = drv.pane
    other_stream = drv.send("an unrelated long chat")
    drv.wait_tool_running(other_stream)

    view = fan_out(drv, "two long runs", ["demo", "fake-tool"])
    streams = member_streams(view)
    for pane, stream_id in zip(view.panes(), streams, strict=True):
        drv.wait_tool_running(stream_id, pane)
    assert drv.window.running_count() == 3

    stop_job = view.findChild(QPushButton, "stopJobButton")
    assert stop_job is not None and stop_job.isEnabled()
    stop_job.click()
    for pane in view.panes():
        wait_pane_done(qtbot, pane)
    for stream_id in streams:
        assert processes_of(stream_id) == [], "the job's process trees must be gone"
        assert drv.stored_turn(stream_id).status == "cancelled"
    for pane in view.panes():
        turn = pane.turn_views()[-1]
        assert turn.status == "cancelled"
        assert turn.text(), "partial output stays"
    qtbot.waitUntil(lambda: view.status == "cancelled")

    # The other chat's run is untouched.
    assert other_pane.running_stream == other_stream
    assert processes_of(other_stream), "the other chat keeps running"
    assert drv.stored_turn(other_stream).status == "running"
    stop_button(other_pane).click()
    drv.wait_finished(other_pane)
    assert processes_of(other_stream) == []


@pytest.mark.usefixtures("home")
def test_job_results_persist_across_a_restart(start_app: StartApp, qtbot: QtBot) -> None:
    first = start_app()
    add_agent(first, fake_manifest("tool"))
    view = fan_out(first, "persist me", ["demo", "fake-tool"])
    demo_pane, fake_pane = view.panes()
    demo_stream, fake_stream = member_streams(view)
    qtbot.waitUntil(lambda: "I'll run a tool." in fake_pane.turn_views()[-1].text(),
                    timeout=10_000)
    wait_pane_done(qtbot, demo_pane)
    stop_button(fake_pane).click()
    wait_pane_done(qtbot, fake_pane)
    qtbot.waitUntil(lambda: view.status == "cancelled")
    job_id = view.job.job_id
    first.close()

    second = start_app()
    jobs: list[FanOutJob] = second.app.fanout.jobs()
    assert [j.job_id for j in jobs] == [job_id]
    (job,) = jobs
    assert job.prompt == "persist me"
    assert [m.stream_id for m in job.members] == [demo_stream, fake_stream]
    assert second.app.fanout.status(job_id) == "cancelled"
    statuses = {m.agent: second.app.fanout.member_status(m) for m in job.members}
    assert statuses == {"demo": "completed", "fake-tool": "cancelled"}
    sidebar = second.window.sidebar
    titles = [sidebar.list.item(r).text() for r in range(sidebar.list.count())]
    assert "persist me · Fake agent (tool)" in titles
    # Reopened as a normal chat: the stopped member keeps its partial text.
    fake_member = next(m for m in job.members if m.agent == "fake-tool")
    second.window.open_conversation(fake_member.conversation_id)
    restored = second.pane
    qtbot.waitUntil(lambda: bool(restored.turn_views()) and not restored.transcript.busy)
    turn = restored.turn_views()[0]
    assert turn.status == "cancelled"
    assert "I'll run a tool." in turn.text()


def test_a_running_member_opened_from_the_sidebar_can_be_stopped_there(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    add_agent(drv, fake_manifest("tool"))
    view = fan_out(drv, "open me elsewhere", ["demo", "fake-tool"])
    demo_pane, fake_pane = view.panes()
    demo_stream, fake_stream = member_streams(view)
    drv.wait_tool_running(fake_stream, fake_pane)
    drv.wait_tool_running(demo_stream, demo_pane)

    drv.window.open_conversation(fake_pane.conversation_id)  # as a sidebar click does
    main_pane = drv.pane
    assert main_pane is not fake_pane and main_pane.conversation_id == fake_pane.conversation_id
    assert main_pane.running_stream == fake_stream
    qtbot.waitUntil(lambda: bool(main_pane.turn_views())
                    and "I'll run a tool." in main_pane.turn_views()[-1].text())
    assert drv.window.running_count() == 2  # one run, however many views show it
    stop_button(main_pane).click()
    drv.wait_finished(main_pane)
    wait_pane_done(qtbot, fake_pane)
    assert processes_of(fake_stream) == []
    assert main_pane.turn_views()[-1].status == "cancelled"
    assert fake_pane.turn_views()[-1].status == "cancelled"
    assert view.status == "running", "the demo member still runs"
    assert processes_of(demo_stream)

    # Deleting a running member's conversation stops its run first and drops its pane.
    drv.window.delete_requested.emit(demo_pane.conversation_id)
    qtbot.waitUntil(lambda: view.pane(demo_pane.conversation_id) is None, timeout=15_000)
    assert processes_of(demo_stream) == []
    assert drv.app.store.get_conversation(fake_pane.conversation_id) is not None
    assert view.panes() == [fake_pane]
