"""Fan-out on a host (issue 25 follow-up): the "Ask several agents" form's "Run on" (default
this computer) lists the hosts of "New chat on" and "Other host…" (typed, checked by the same
parser, its problem beside it); the agents listed are those found on the chosen host; Ask makes
each member chat on that host, and its turn runs there (the configured command target ``box``
of tests/ui/test_chat_host.py: the supervisor right here, no sshd). Pictures of the form light
and dark (``TOLARIA_DOCS_SHOTS=1``: docs/fanout-host[-dark].png)."""

from __future__ import annotations

from pathlib import Path

from helpers import fake_manifest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot
from ui.test_chat_host import box  # noqa: F401 (the fixture)
from ui.test_fanout import add_agent, wait_pane_done
from ui.uihelpers import AppDriver, StartApp, save_shot

from tolaria.ui import theme
from tolaria.ui.fanout.fanout_dialog import OTHER_HOST, FanOutDialog


def open_form(drv: AppDriver) -> FanOutDialog:
    drv.window.fan_out_action.trigger()
    dialog = drv.window.findChild(FanOutDialog, "fanOutDialog")
    assert dialog is not None and dialog.isVisible()
    return dialog


def choose(dialog: FanOutDialog, text: str) -> None:
    index = dialog.hosts.findText(text)
    assert index >= 0, [dialog.hosts.itemText(i) for i in range(dialog.hosts.count())]
    dialog.hosts.setCurrentIndex(index)
    dialog.hosts.activated.emit(index)


def listed(dialog: FanOutDialog) -> dict[str, tuple[str, bool]]:
    return {str(dialog.agents.item(r).data(Qt.ItemDataRole.UserRole)):
            (dialog.agents.item(r).text(),
             bool(dialog.agents.item(r).flags() & Qt.ItemFlag.ItemIsEnabled))
            for r in range(dialog.agents.count())}


def test_a_job_runs_its_agents_on_the_chosen_host(start_app: StartApp, box: str,  # noqa: F811
                                                  qtbot: QtBot, tmp_path: Path) -> None:
    drv = start_app()
    agent = fake_manifest("normal")
    add_agent(drv, agent)
    dialog = open_form(drv)
    assert dialog.host() == "" and dialog.hosts.currentText() == "This computer"
    texts = [dialog.hosts.itemText(i) for i in range(dialog.hosts.count())]
    assert texts == ["This computer", "box", OTHER_HOST]
    assert listed(dialog)[agent.id][1]

    choose(dialog, "box")  # its agents, as a look there finds them
    assert dialog.host() == "box"
    qtbot.waitUntil(lambda: drv.window.header.agent_picker.menu_rows("box") is not None,
                    timeout=20_000)
    qtbot.waitUntil(lambda: listed(dialog).get(agent.id, ("", False))[1])
    assert "Ollama" not in " ".join(t for t, _ok in listed(dialog).values())

    for suffix, name in (("", "light"), ("-dark", "dark")):  # pictures of the form
        theme.apply_theme(name)
        dialog.prompt.setPlainText("Summarise the build log")
        qtbot.wait(50)
        assert save_shot(dialog, tmp_path, f"fanout-host{suffix}.png").is_file()
    theme.apply_theme("light")

    dialog.set_checked([agent.id])
    dialog.prompt.setPlainText("hello from the job")
    before = set(drv.window.fan_out_views)
    ask = dialog.findChild(QPushButton, "fanOutAskButton")
    assert ask is not None and ask.isEnabled()
    ask.click()
    (job_id,) = set(drv.window.fan_out_views) - before
    view = drv.window.fan_out_views[job_id]
    (member,) = view.job.members
    chat = drv.stored_conversation(member.conversation_id)
    assert chat.host == "box" and chat.cwd is None, "on box, in its home"
    pane = view.pane(member.conversation_id)
    assert pane is not None
    wait_pane_done(qtbot, pane)
    qtbot.waitUntil(lambda: drv.app.fanout.status(job_id) != "running", timeout=30_000)
    assert drv.app.fanout.status(job_id) == "completed"
    assert drv.stored_turn(member.stream_id or "").status == "completed"


def test_other_host_is_checked_and_a_bad_one_is_said_beside_it(start_app: StartApp,
                                                               qtbot: QtBot) -> None:
    drv = start_app()
    dialog = open_form(drv)
    choose(dialog, OTHER_HOST)
    assert dialog.host_entry.isVisible() and dialog.host() == ""
    assert dialog.hosts.currentText() == "This computer", "nothing chosen until typed"
    type_entry_in(dialog, "-oProxyCommand=x")
    assert dialog.host_entry.error.text(), "the parser's words beside the field"
    assert dialog.host() == ""
    type_entry_in(dialog, "me@devbox")
    assert not dialog.host_entry.isVisible()
    assert dialog.host() == "me@devbox" and dialog.hosts.currentText() == "me@devbox"


def type_entry_in(dialog: FanOutDialog, text: str) -> None:
    edit = dialog.host_entry.edit
    edit.clear()
    QTest.keyClicks(edit, text)
    QTest.keyClick(edit, Qt.Key.Key_Return)

