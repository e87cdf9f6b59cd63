"""A follow-up continues the agent's session through ``resume_command`` (Codex's shape:
a whole command, not arguments appended to ``command``), all the way from the chat."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp

from tolaria.core.adapters.manifest import load_adapters

RESUMING = """
id = "demo-subcommand"
name = "Demo with a resume subcommand"
protocol = "claude-stream-json"
command = ["{python}", "-m", "tolaria.demo_agent", "--", "{prompt}"]
resume_command = ["{python}", "-m", "tolaria.demo_agent", "--resume", "{session_id}", "--",
                  "{prompt}"]
"""


def test_follow_up_uses_the_resume_command(start_app: StartApp, home: Path, qtbot: QtBot) -> None:
    (home / "adapters").mkdir(exist_ok=True)
    (home / "adapters" / "demo-subcommand.toml").write_text(RESUMING)
    manifest = load_adapters().get("demo-subcommand")
    assert manifest.can_resume and not manifest.resume
    drv = start_app(agent="demo-subcommand")
    drv.send("first question")
    drv.wait_finished()
    conversation = drv.app.store.get_conversation(drv.pane.conversation_id)
    assert conversation is not None and conversation.agent == "demo-subcommand"
    first_session = conversation.agent_session_id
    assert first_session
    drv.send("--second question")
    turn = drv.wait_finished()
    assert f"Continuing session {first_session[:8]}" in turn.text()
    # The prompt went alone (no history preamble), and as the prompt although it starts with --.
    assert 'You asked "--second question"' in turn.text()
    stored = drv.app.store.turns(conversation.id)
    assert [t.session_id for t in stored] == [first_session, first_session]
