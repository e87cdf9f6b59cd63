"""The chat keeps its agent process between turns (docs/adr/0008): deleting the chat, changing its
folder and quitting close the kept processes, trees gone."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
from helpers import is_gone, marker_pids
from ui.uihelpers import AppDriver, StartApp

from tolaria.core.adapters.manifest import Manifest, StopPolicy

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "fake_claude_stream.py"


def fake_claude() -> Manifest:
    return Manifest(id="fake-claude-stream", name="Fake Claude (stream input)",
                    protocol="claude-stream-json", input="claude-stream-json",
                    command=(sys.executable, str(FAKE)),
                    stop=StopPolicy(polite="interrupt", polite_window_ms=1000),
                    resume=("--resume", "{session_id}"))


def kept(drv: AppDriver, conversation_id: int) -> tuple[str, psutil.Process]:
    """The chat's kept process: (its marker, the agent)."""
    controller = drv.app.controller
    key = controller.keep_key(conversation_id)
    marker, pid = controller.keepers.stream_id(key), controller.keepers.pid(key)
    assert marker is not None and pid is not None, "the chat should keep its agent"
    return marker, psutil.Process(pid)


def turn(drv: AppDriver, conversation_id: int, prompt: str) -> None:
    controller = drv.app.controller
    assert controller.send(conversation_id, prompt) is not None
    drv.qtbot.waitUntil(lambda: controller.running_stream(conversation_id) is None,
                        timeout=15_000)


def test_turns_share_the_process_and_deleting_the_chat_closes_it(
        start_app: StartApp, tmp_path: Path) -> None:
    drv = start_app(cwd=str(tmp_path))
    drv.use_agent(fake_claude())
    chat = drv.pane.conversation_id
    drv.send("hello")
    first = drv.wait_finished()
    assert first.status == "completed" and "You said: hello" in first.text()
    marker, agent = kept(drv, chat)
    drv.send("again")
    second = drv.wait_finished()
    assert second.text().strip() == "You said: again", "no history resent to a kept agent"
    assert kept(drv, chat) == (marker, agent), "the second turn reuses the process"
    assert marker_pids(marker) == [agent.pid]
    drv.app.controller.delete(chat)
    drv.qtbot.waitUntil(lambda: not marker_pids(marker) and is_gone(agent), timeout=10_000)
    assert drv.app.controller.keepers.keys() == []


def test_a_new_folder_closes_the_kept_process(start_app: StartApp, tmp_path: Path) -> None:
    drv = start_app(cwd=str(tmp_path))
    drv.use_agent(fake_claude())
    chat = drv.pane.conversation_id
    turn(drv, chat, "hello")
    marker, agent = kept(drv, chat)
    drv.app.controller.set_cwd(chat, str(tmp_path))  # unchanged: the process stays
    drv.qtbot.wait(300)
    assert kept(drv, chat) == (marker, agent)
    other = tmp_path / "elsewhere"
    other.mkdir()
    drv.app.controller.set_cwd(chat, str(other))
    drv.qtbot.waitUntil(lambda: not marker_pids(marker) and is_gone(agent), timeout=10_000)
    turn(drv, chat, "there")
    assert kept(drv, chat)[1].cwd() == str(other)


def test_quitting_closes_every_kept_process(start_app: StartApp, tmp_path: Path) -> None:
    drv = start_app(cwd=str(tmp_path))
    drv.use_agent(fake_claude())
    controller = drv.app.controller
    first = drv.pane.conversation_id
    second = controller.new_conversation("fake-claude-stream", str(tmp_path)).id
    turn(drv, first, "one")
    turn(drv, second, "two")
    agents = [kept(drv, first), kept(drv, second)]
    assert agents[0][1].pid != agents[1][1].pid, "one process per chat"
    drv.close()  # the app's own shutdown path
    for marker, agent in agents:
        assert marker_pids(marker) == [] and is_gone(agent)
    assert controller.keepers.keys() == []
