"""`tolaria streams` / `tolaria abort` in another terminal reach the GUI's runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp, processes_of

from tolaria.core.process import proctree


def _tolaria(qtbot: QtBot, *args: str) -> subprocess.CompletedProcess[str]:
    # Popen + waitUntil, never run(): the GUI's loop must keep turning to answer the socket.
    proc = subprocess.Popen([sys.executable, "-m", "tolaria", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    # In real life the CLI runs in another terminal; here it is our child, and a stop would take
    # an unmarked child born during the run for an orphan the run left behind.
    proctree.remember_own_child(proc.pid)
    try:
        qtbot.waitUntil(lambda: proc.poll() is not None, timeout=20_000)
    finally:
        proctree.forget_own_child(proc.pid)
    out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_streams_and_abort_from_another_process(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    stream_id = drv.send("long one")
    drv.wait_tool_running(stream_id)

    listed = _tolaria(qtbot, "streams", "--json")
    assert listed.returncode == 0, listed.stderr
    streams = json.loads(listed.stdout)
    assert [s["stream_id"] for s in streams] == [stream_id]
    assert streams[0]["owner_pid"] == os.getpid()
    conversation = drv.app.store.get_conversation(drv.pane.conversation_id)
    assert conversation is not None
    assert streams[0]["chat"] == conversation.title  # the window tells `streams` its chat

    aborted = _tolaria(qtbot, "abort", stream_id)
    assert aborted.returncode == 0, (aborted.returncode, aborted.stdout, aborted.stderr)
    assert aborted.stdout.strip() == "true", (aborted.stdout, aborted.stderr)
    assert processes_of(stream_id) == []  # the abort answers once the tree is gone
    turn = drv.wait_finished()
    assert turn.status == "cancelled"


@pytest.mark.parametrize("args", [["--agent", "nope"], ["--cwd", "/no/such/folder"]])
def test_bad_preselection_falls_back_and_says_so(start_app: StartApp, args: list[str]) -> None:
    kwargs = {args[0][2:]: args[1]}
    drv = start_app(**kwargs)
    problems = drv.window.findChild(QLabel, "settingsProblems")
    assert problems is not None and args[0] in problems.text()
    assert drv.window.header.agent_picker.current_agent() == "demo"


def test_preselected_agent_and_folder(
        start_app: StartApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The demo runs as `python -m tolaria.demo_agent` in the chat's folder: from a checkout
    # that is not pip-installed, Python finds the package only through PYTHONPATH.
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    folder = tmp_path / "project"
    folder.mkdir()
    drv = start_app(agent="demo", cwd=str(folder))
    conversation = drv.app.store.get_conversation(drv.pane.conversation_id)
    assert conversation is not None and conversation.cwd == str(folder)
    assert drv.window.header.folder_button.text() == "project"
    stream_id = drv.send("where am I")
    drv.wait_finished()
    assert drv.stored_turn(stream_id).status == "completed"
