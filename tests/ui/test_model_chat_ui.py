"""A model chat in the window: the tool-round limit reads as a pause, not a failure, and the
notices of the turn (tool limit, no tools) are shown in it; both survive a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.fake_openai_server import (
    FakeOpenAIServer,
    text_reply,
    tool_reply,
    tools_unsupported_reply,
)
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp

from tolaria.core.adapters.manifest import Manifest
from tolaria.ui.transcript.turn_view import TurnView


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    yield srv
    srv.stop()


def model_agent(server: FakeOpenAIServer, max_iterations: int = 8) -> Manifest:
    return Manifest(id="fake-chat", name="Fake chat", protocol="openai-chat", command=(),
                    base_url=server.base_url, model="fake-model", max_iterations=max_iterations)


def notice_texts(turn: TurnView) -> list[str]:
    return [label.text() for label in turn.body.findChildren(QLabel, "turnNotice")]


def test_max_iterations_reads_as_a_pause(
        start_app: StartApp, server: FakeOpenAIServer, qtbot: QtBot) -> None:
    server.script(tool_reply(("c1", "list_directory", {})), tool_reply(("c2", "list_directory", {})))
    drv = start_app()
    drv.use_agent(model_agent(server, max_iterations=1))
    drv.send("look around")
    turn = drv.wait_finished()
    footer = turn.footer.text()
    assert footer.startswith("Stopped at the tool-round limit (max_iterations) after ")
    assert "Failed" not in footer
    notes = notice_texts(turn)
    assert notes == ["Stopped after 1 tool round (max_iterations); send a message to continue"]
    assert any("tool-round limit" in label.text()
               for label in drv.pane.status_line.findChildren(QLabel))
    drv.close()

    again = start_app()
    restored = again.pane
    qtbot.waitUntil(lambda: bool(restored.turn_views()) and not restored.transcript.busy)
    view = restored.turn_views()[0]
    assert view.footer.text().startswith("Stopped at the tool-round limit (max_iterations)")
    assert notice_texts(view) == notes


def test_no_tools_notice_is_shown_in_the_turn(
        start_app: StartApp, server: FakeOpenAIServer) -> None:
    server.script(tools_unsupported_reply(), text_reply("Plain answer"))
    drv = start_app()
    drv.use_agent(model_agent(server))
    drv.send("hi")
    turn = drv.wait_finished()
    assert turn.status == "completed" and turn.text() == "Plain answer"
    assert notice_texts(turn) == ["fake-model does not support tools; answering without them"]


def test_follow_up_after_restart_continues_the_saved_history(
        start_app: StartApp, server: FakeOpenAIServer, qtbot: QtBot, home: Path) -> None:
    (home / "notes.txt").write_text("alpha\n")
    server.script(tool_reply(("c1", "read_file", {"path": "notes.txt"})), text_reply("It says alpha"))
    first = start_app()
    first.use_agent(model_agent(server))
    first.app.controller.set_cwd(first.pane.conversation_id, str(home))
    first.send("what is in notes.txt?")
    assert first.wait_finished().status == "completed"
    first.close()

    server.script(text_reply("Still alpha"))
    second = start_app()
    second.use_agent(model_agent(server))
    pane = second.pane
    qtbot.waitUntil(lambda: bool(pane.turn_views()) and not pane.transcript.busy)
    second.send("and now?")
    assert second.wait_finished().text() == "Still alpha"
    sent = server.requests[-1].body["messages"]
    # The saved message list, tool call and result included; the new prompt goes alone.
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant",
                                         "user"]
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "alpha\n"}
    assert sent[-1] == {"role": "user", "content": "and now?"}
