"""The window and ``tolaria run`` follow one set of chat rules (tolaria/chats/service.py): for the
same stored chat they send the agent the same prompt (the same history preamble, abandoned
attempts left out), make the same resume decision and give the chat the same title. And a long
CJK/emoji history (issue 14, case 4) reaches a real agent through argv in both, under the
kernel's 128 KiB per-argument limit, where a budget counted in characters died with "Argument
list too long"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers import stored_turn
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver

from tolaria.core.events import TextDelta
from tolaria.core.store.db import MARKER_TURN_RESTARTED, Store

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "fakes"
#: Linux's MAX_ARG_STRLEN: one argv element, its NUL included.
ARG_STRLEN = 131_072

ADAPTERS = {
    # The prompt as one argv element; no resume: follow-ups carry the history.
    "echo": f'protocol = "lines"\ncommand = [{json.dumps(sys.executable)}, '
            f'{json.dumps(str(FAKES / "argv_agent.py"))}, "{{prompt}}"]\n',
    # Claude-shaped, resumes its session ("fake-session"); prints its argv.
    "resumer": f'protocol = "claude-stream-json"\ncommand = [{json.dumps(sys.executable)}, '
               f'{json.dumps(str(FAKES / "fake_agent.py"))}, "print_env", "{{prompt}}"]\n'
               'resume = ["--resume", "{session_id}"]\n',
}


def _prepare_home(home: Path) -> Path:
    (home / "adapters").mkdir(parents=True, exist_ok=True)
    for name, body in ADAPTERS.items():
        (home / "adapters" / f"{name}.toml").write_text(f'id = "{name}"\n{body}')
    (home / "data").mkdir(exist_ok=True)
    return home / "data" / "tolaria.sqlite3"


def _stored_chats(db: Path, cwd: Path) -> None:
    """Chat 1: echo, with a stopped turn and an abandoned (restarted) attempt; chat 2: resumer,
    answered last in its session; chat 3: a new chat never sent to."""
    store = Store(db)
    try:
        echo = store.create_conversation("Echo chat", "echo", str(cwd))
        stored_turn(store, echo.id, "echo", "what is tolaria", "a chat app")
        wedged = stored_turn(store, echo.id, "echo", "wedged", "never mind", stop="cancelled")
        store.add_marker(echo.id, MARKER_TURN_RESTARTED, turn_id=wedged, data={})
        stored_turn(store, echo.id, "echo", "and its store?", "SQLite, part", stop="cancelled")
        resumer = store.create_conversation("Resumer chat", "resumer", str(cwd))
        stored_turn(store, resumer.id, "resumer", "first question", "first answer",
              session="fake-session")
        store.create_conversation("New chat", "echo", str(cwd))
    finally:
        store.close()


def _wide_chat(db: Path, cwd: Path) -> None:
    """Chat 1: twelve long CJK/emoji exchanges (7 bytes for every 2 characters of answer)."""
    store = Store(db)
    try:
        chat = store.create_conversation("長い会話", "echo", str(cwd))
        for i in range(12):
            stored_turn(store, chat.id, "echo", f"質問 {i} " + "漢字" * 900,
                        "🙂漢" * 2500 + f" 答え {i}")
    finally:
        store.close()


def _argv(text: str) -> list[str]:
    report: dict[str, Any] = json.loads(text.strip().splitlines()[-1])
    argv: list[str] = report["argv"]
    return argv


def _in_window(drv: AppDriver, qtbot: QtBot, chat_id: int, prompt: str) -> tuple[str, list[str]]:
    """Send ``prompt`` to a stored chat the window's way; the finished turn's status and the
    argv the agent got."""
    store = drv.app.store
    sid = drv.app.controller.send(chat_id, prompt)
    assert sid is not None

    def finished() -> bool:
        turn = store.turn_by_stream(sid)
        return turn is not None and turn.status != "running"

    qtbot.waitUntil(finished, timeout=30_000)
    turn = store.turn_by_stream(sid)
    assert turn is not None
    text = "".join(e.text for e in store.events(turn.id) if isinstance(e, TextDelta))
    return turn.status, _argv(text)


def _with_cli(home: Path, chat_id: int, prompt: str) -> tuple[int, list[str], str]:
    """``tolaria run --chat`` on another home holding the same stored chats."""
    env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    env.update(TOLARIA_HOME=str(home),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    ran = subprocess.run([sys.executable, "-m", "tolaria", "run", "--json", "--chat",
                          str(chat_id), prompt], env=env, cwd=home, capture_output=True,
                         text=True, timeout=60, check=False)
    events = [json.loads(line) for line in ran.stdout.splitlines()]
    text = "".join(e["text"] for e in events if e["kind"] == "text_delta")
    return ran.returncode, _argv(text) if text else [], ran.stderr


def _titles(db: Path) -> dict[int, str]:
    store = Store(db)
    try:
        return {c.id: c.title for c in store.list_conversations()}
    finally:
        store.close()


def test_window_and_tolaria_run_decide_alike(start_app: Callable[..., AppDriver], home: Path,
                                             tmp_path: Path, qtbot: QtBot) -> None:
    cli_home = tmp_path / "cli-home"
    for where in (home, cli_home):
        _stored_chats(_prepare_home(where), where)
    drv = start_app()
    window = {chat: _in_window(drv, qtbot, chat, prompt)
              for chat, prompt in ((1, "and then?"), (2, "second question"), (3, "name me  now"))}
    cli = {chat: _with_cli(cli_home, chat, prompt)
           for chat, prompt in ((1, "and then?"), (2, "second question"), (3, "name me  now"))}
    assert {c: w[0] for c, w in window.items()} == dict.fromkeys(window, "completed")
    assert {c: r[0] for c, r in cli.items()} == dict.fromkeys(cli, 0), [r[2] for r in cli.values()]
    # History: the same preamble, the stopped turn marked, the abandoned attempt left out.
    [sent] = window[1][1]
    assert cli[1][1] == [sent]
    assert sent.startswith("Previous conversation:\n\nUser: what is tolaria\n\nAssistant: a chat")
    assert "Assistant: SQLite, part\n[stopped by the user]" in sent and "wedged" not in sent
    # Resume: the agent's own session, the prompt alone.
    assert window[2][1][-3:] == cli[2][1][-3:] == ["second question", "--resume", "fake-session"]
    # Title: the first prompt names a new chat in both.
    assert cli[3][1] == window[3][1] == ["name me  now"]
    drv.close()
    assert _titles(home / "data" / "tolaria.sqlite3") == _titles(
        cli_home / "data" / "tolaria.sqlite3") == {1: "Echo chat", 2: "Resumer chat",
                                                   3: "name me now"}


def test_a_long_cjk_emoji_history_reaches_the_agent_in_argv(
        start_app: Callable[..., AppDriver], home: Path, tmp_path: Path, qtbot: QtBot) -> None:
    cli_home = tmp_path / "cli-home"
    for where in (home, cli_home):
        _wide_chat(_prepare_home(where), where)
    drv = start_app()
    status, window_argv = _in_window(drv, qtbot, 1, "次は？🙂")
    code, cli_argv, stderr = _with_cli(cli_home, 1, "次は？🙂")
    assert (status, code) == ("completed", 0), stderr
    [sent] = window_argv
    assert cli_argv == [sent]
    assert len(sent.encode()) < ARG_STRLEN
    assert sent.endswith("(end of previous conversation)\n\n次は？🙂")
    # The newest exchanges travel, the oldest were left out first.
    assert "質問 11 " in sent and sent.count("答え") < 12 and "質問 0 " not in sent
    assert "答え 11\n\n(end of previous conversation)" in sent
