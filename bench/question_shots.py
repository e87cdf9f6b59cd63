"""Take the pictures of an open permission question that survives a search jump (issue 22):

    QT_QPA_PLATFORM=offscreen python bench/question_shots.py [--out-dir docs]

docs/question-waiting.png        Ctrl+F jumped to an old turn while the agent waits: the running
                                 turn is out of the window, the notice under the composer says
                                 "Waiting for your answer" with a link to the question
docs/question-after-search.png   Ctrl+F back to the running turn: its question shown again,
                                 open, from the store

The agent is the scripted ACP agent of the tests (tests/fakes/fake_acp_agent.py
``ask_permission``), a real process; the chat's older turns are written through the real store
(``fill_chat``). Not a measurement.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests", ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from screenshot import agent_folder, save, shots_main, until  # noqa: E402  (bench/screenshot.py)


async def shoot(out_dir: Path) -> None:
    from tolaria.app.main import Tolaria

    app = Tolaria(cwd=str(agent_folder()))
    await app.start()
    window = app.window
    try:
        window.resize(1180, 760)
        [chat] = [c for c in app.store.list_conversations() if c.title == "Tidy the repository"]
        window.sidebar.select(chat.id)  # as a click in the sidebar
        pane = window.current_pane()
        assert pane is not None and pane.conversation_id == chat.id
        app.controller.set_agent(pane.conversation_id, "ask-agent")
        await until(lambda: not pane.transcript.busy)
        pane.composer.setPlainText("Clean up the build folder")
        pane.button.click()
        stream_id = pane.running_stream
        assert stream_id is not None

        def card_shown() -> bool:
            view = pane.transcript.turn(stream_id)
            return view is not None and any(c.pending for c in view.permission_cards())

        await until(card_shown)
        bar = pane.search_bar
        bar.open()
        bar.field.setText("turn-2-marker")
        bar.field.returnPressed.emit()
        await until(lambda: pane.transcript.turn(stream_id) is None
                    and not pane.transcript.busy and pane.watchdog.waiting)
        await asyncio.sleep(0.5)  # the view anchors the match at its top as it renders
        save(window.grab(), out_dir / "question-waiting.png")
        bar.field.setText("clean up the build")
        bar.field.returnPressed.emit()
        await until(lambda: card_shown() and not pane.transcript.busy)
        view = pane.transcript.turn(stream_id)
        assert view is not None
        pane.transcript.ensureWidgetVisible(view.permission_cards()[0])
        await until(lambda: not pane.transcript.busy)
        await asyncio.sleep(0.5)
        save(window.grab(), out_dir / "question-after-search.png")
        app.controller.answer_permission(stream_id, view.permission_cards()[0].key, "yes")
        await until(lambda: pane.running_stream is None)
    finally:
        window.force_close()
        await app.shutdown()


def prepare(home: Path) -> None:
    """The scripted ACP agent, and a chat of 20 older turns."""
    fake = ROOT / "tests" / "fakes" / "fake_acp_agent.py"
    (home / "adapters" / "ask-agent.toml").write_text(
        'id = "ask-agent"\nname = "ACP agent"\nprotocol = "acp"\n'
        f'command = ["{{python}}", "{fake}", "ask_permission"]\n')
    from helpers import fill_chat  # tests/helpers.py

    from tolaria.core.store.db import Store

    store = Store()
    try:
        chat = store.create_conversation("Tidy the repository", "demo", str(agent_folder()))
        fill_chat(store, chat.id, 20, text_chars=600)
    finally:
        store.close()


def main() -> int:
    return shots_main(__doc__.splitlines()[0], shoot, prepare)


if __name__ == "__main__":
    sys.exit(main())
