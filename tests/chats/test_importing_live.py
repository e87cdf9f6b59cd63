"""Importing a session while its CLI is still writing it (issue 22 item 6), on real files the pinned
CLIs wrote (tests/fixtures/sessions_live, captured by ``tests/e2e/capture_sessions.py --live``):
``mid`` was copied while the first turn's tool (``sleep 8``) ran, ``final`` after three turns
(that tool's turn answered, a turn stopped mid-tool by Tolaria's Stop, a text turn).

A turn whose last record is not a completed answer is stored ``interrupted`` and completed in
place by a later import; a complete turn is ``completed`` at once, however recent the file; turns
are known by the CLI's own record ids, and Claude's "[Request interrupted by user ...]" record is
not a turn. A second process that writes a session in pieces (cut mid-record) while imports run
ends with exactly what one import of the whole file stores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli_env, text_of

from tolaria.chats.importers import IMPORTERS
from tolaria.chats.importing import IMPORT_MARKER, import_sessions
from tolaria.core.events import Done, Init, TextDelta, ToolDone, ToolStart
from tolaria.core.store.db import Store

ROOT = Path(__file__).resolve().parents[2]
LIVE = ROOT / "tests" / "fixtures" / "sessions_live"
AGENTS = ["claude", "codex", "gemini", "qwen", "opencode"]
#: Gemini writes a tool call into its session only once the tool has ended, and nothing at all
#: for a tool that was stopped: such a turn cannot be told from an answered one.
TELLS_UNFINISHED = [a for a in AGENTS if a != "gemini"]
PROMPTS = ["E2E-WAIT: run the waiting command", "E2E-SLEEP: run the slow command",
           "E2E-TEXT: say hello"]


def lay(home: Path, agent: str, phase: str) -> None:
    """The CLI's files as they were at ``phase``, over what ``home`` had (the CLI rewrote them)."""
    shutil.copytree(LIVE / agent / phase, home, dirs_exist_ok=True)


def session_file(home: Path, agent: str) -> Path:
    [path] = list(IMPORTERS[agent].find(home))
    return path


def summary(store: Store, chat_id: int) -> list[tuple[str, str, str, list[str]]]:
    """Per stored turn: (prompt, status, text, tool outputs)."""
    out = []
    for turn in store.turns(chat_id):
        events = store.events(turn.id)
        out.append((turn.prompt, turn.status, text_of(events),
                    [e.output for e in events if isinstance(e, ToolDone)]))
    return out


@pytest.mark.parametrize("agent", AGENTS)
def test_a_session_caught_mid_turn_is_completed_in_place_by_the_next_import(
        agent: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    lay(home, agent, "mid")
    store = Store(tmp_path / "t.sqlite3")
    try:
        [first] = import_sessions(store, home, [agent]).imported
        [turn] = store.turns(first.conversation_id)
        assert PROMPTS[0] in turn.prompt and turn.session_id == first.session_id
        events = store.events(turn.id)
        assert isinstance(events[0], Init) and text_of(events) == "I'll run it."
        if agent in TELLS_UNFINISHED:
            assert turn.status == "interrupted" and first.turns_unfinished == 1
            [start] = [e for e in events if isinstance(e, ToolStart)]
            assert "sleep 8" in json.dumps(start.input)
            assert not [e for e in events if isinstance(e, ToolDone)], "its result is to come"
        else:
            assert turn.status == "completed"

        lay(home, agent, "final")
        [second] = import_sessions(store, home, [agent]).imported
        assert second.conversation_id == first.conversation_id
        assert (second.turns_added, second.turns_updated) == (2, 1)
        turns = store.turns(first.conversation_id)
        assert turns[0].id == turn.id, "completed in place, not imported again"
        stored = summary(store, first.conversation_id)
        assert [s[0] for s in stored] == [t.prompt for t in turns]
        assert all(p in s[0] for p, s in zip(PROMPTS, stored, strict=True))
        statuses = [s[1] for s in stored]
        if agent in TELLS_UNFINISHED:
            assert statuses == ["completed", "interrupted", "completed"]
        else:
            assert statuses == ["completed", "completed", "completed"]
        _, _, text, outputs = stored[0]
        assert text.startswith("I'll run it.\n\nThe command printed:") and text.count(
            "I'll run it.") == 1
        assert len(outputs) == 1 and "started" in outputs[0] and "finished" in outputs[0]
        assert stored[2][2] == "Hello from the fake model!"
        assert not any("[Request interrupted" in s[0] for s in stored)

        again = import_sessions(store, home, [agent])
        assert again.imported == [] and again.unchanged == 1
        assert len(store.markers(first.conversation_id, IMPORT_MARKER)) == 2
    finally:
        store.close()


@pytest.mark.parametrize("agent", AGENTS)
def test_a_finished_session_imports_complete_at_once_however_recent(agent: str,
                                                                    tmp_path: Path) -> None:
    home = tmp_path / "home"
    lay(home, agent, "final")
    now = time.time()
    os.utime(session_file(home, agent), (now, now))  # written this very second
    store = Store(tmp_path / "t.sqlite3")
    try:
        [item] = import_sessions(store, home, [agent]).imported
        stored = summary(store, item.conversation_id)
        assert len(stored) == 3, "one turn per prompt: Claude's interruption note is not a turn"
        assert stored[0][1] == "completed" and stored[2][1] == "completed"
        assert stored[1][1] == ("interrupted" if agent in TELLS_UNFINISHED else "completed")
        assert "I'll run it." in stored[1][2], "the stopped turn keeps what it said"
        assert item.turns_unfinished == (1 if agent in TELLS_UNFINISHED else 0)
    finally:
        store.close()


@pytest.mark.parametrize("agent", TELLS_UNFINISHED)
def test_a_tool_the_user_stopped_is_stored_open_not_failed(agent: str, tmp_path: Path) -> None:
    """The second turn was stopped while its ``sleep 300`` ran. Claude, Qwen and Codex then write
    their own note to the model as the tool's "result" (an error for Claude and Qwen: shown as
    "✗ failed"; "aborted by user" for Codex: shown as "✓ done"). It is not the tool's result:
    the call is stored without one, so it ends as its interrupted turn did, as a stopped tool
    of a live turn does."""
    home = tmp_path / "home"
    lay(home, agent, "final")
    store = Store(tmp_path / "t.sqlite3")
    try:
        [item] = import_sessions(store, home, [agent]).imported
        stopped = store.turns(item.conversation_id)[1]
        assert stopped.status == "interrupted"
        events = store.events(stopped.id)
        [start] = [e for e in events if isinstance(e, ToolStart)]
        assert "sleep 300" in json.dumps(start.input)
        assert [e for e in events if isinstance(e, ToolDone)] == []
        assert import_sessions(store, home, [agent]).unchanged == 1, "and nothing grew"
    finally:
        store.close()


def claude_lines(home: Path) -> tuple[Path, list[str]]:
    path = session_file(home, "claude")
    return path, path.read_text().splitlines(keepends=True)


def test_a_claude_file_cut_mid_record_is_completed_by_the_next_import(tmp_path: Path) -> None:
    """The last record half-written (no newline, not JSON yet): the turn it belongs to waits,
    nothing is counted as a bad line, and the whole record completes the same turn later."""
    home = tmp_path / "home"
    lay(home, "claude", "final")
    path, lines = claude_lines(home)
    answer = max(i for i, line in enumerate(lines) if "Hello from the fake model!" in line)
    whole = "".join(lines)
    path.write_text("".join(lines[:answer]) + lines[answer][: len(lines[answer]) // 2])
    store = Store(tmp_path / "t.sqlite3")
    try:
        report = import_sessions(store, home, ["claude"])
        assert report.bad_lines == 0
        [item] = report.imported
        stored = summary(store, item.conversation_id)
        assert [s[1] for s in stored] == ["completed", "interrupted", "interrupted"]
        assert stored[2][2] == "", "its answer is still being written"
        last_id = store.turns(item.conversation_id)[2].id

        path.write_text(whole)
        [again] = import_sessions(store, home, ["claude"]).imported
        assert (again.turns_added, again.turns_updated) == (0, 1)
        stored = summary(store, item.conversation_id)
        assert [s[1] for s in stored] == ["completed", "interrupted", "completed"]
        assert stored[2][2] == "Hello from the fake model!"
        assert store.turns(item.conversation_id)[2].id == last_id
    finally:
        store.close()


def test_a_prompt_with_no_answer_yet_is_interrupted_then_answered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lay(home, "claude", "final")
    path, lines = claude_lines(home)
    prompt = max(i for i, line in enumerate(lines)
                 if '"type":"user"' in line.replace(" ", "") and PROMPTS[2] in line)
    whole = "".join(lines)
    path.write_text("".join(lines[:prompt + 1]))
    store = Store(tmp_path / "t.sqlite3")
    try:
        [item] = import_sessions(store, home, ["claude"]).imported
        turns = store.turns(item.conversation_id)
        assert turns[-1].prompt == PROMPTS[2] and turns[-1].status == "interrupted"
        path.write_text(whole)
        import_sessions(store, home, ["claude"])
        assert summary(store, item.conversation_id)[-1][1:3] == ("completed",
                                                                 "Hello from the fake model!")
    finally:
        store.close()


def test_turns_the_user_ran_in_tolaria_meanwhile_are_not_imported_again(tmp_path: Path) -> None:
    """The user changed the chat in between: imported mid-turn, then (the CLI done) renamed the
    chat and continued it in Tolaria, whose turns the CLI wrote to its own file too. The next
    import completes the first turn in place and adds nothing else; the name stays."""
    home = tmp_path / "home"
    lay(home, "claude", "mid")
    store = Store(tmp_path / "t.sqlite3")
    try:
        [item] = import_sessions(store, home, ["claude"]).imported
        chat = item.conversation_id
        store.rename_conversation(chat, "my renamed chat")
        for n, prompt in enumerate(PROMPTS[1:]):
            sid = f"ai-agent-stream-{n:032x}"
            store.start_turn(chat, sid, "claude", prompt)
            store.append_event(Init(sid, agent="claude", session_id=item.session_id))
            store.append_event(TextDelta(sid, text=f"answered in Tolaria {n}"))
            if n == 0:
                store.mark_interrupted(sid)  # (the user stopped that one)
            else:
                store.append_event(Done(sid, stop_reason="end_turn"))
        lay(home, "claude", "final")
        [again] = import_sessions(store, home, ["claude"]).imported
        assert (again.turns_added, again.turns_updated) == (0, 1)
        stored = summary(store, chat)
        assert [s[0] for s in stored] == PROMPTS
        assert stored[0][1] == "completed" and "The command printed" in stored[0][2]
        assert [s[2] for s in stored[1:]] == ["answered in Tolaria 0", "answered in Tolaria 1"]
        conversation = store.get_conversation(chat)
        assert conversation is not None and conversation.title == "my renamed chat"
    finally:
        store.close()


def test_a_session_imported_before_record_ids_were_kept_gets_only_its_new_turns(
        tmp_path: Path) -> None:
    """A chat from an import that counted turns (its marker has no ``records``): its turns are
    recognised by their prompts, so only the turn beyond them is added."""
    home = tmp_path / "home"
    lay(home, "qwen", "final")
    [session] = IMPORTERS["qwen"].read(session_file(home, "qwen"))
    store = Store(tmp_path / "t.sqlite3")
    try:
        chat = store.create_conversation("old import", "qwen", "/home/user/work").id
        for n, turn in enumerate(session.turns[:2]):
            sid = f"ai-agent-stream-{n + 7:032x}"
            store.start_turn(chat, sid, "qwen", turn.prompt)
            store.append_event(Init(sid, agent="qwen", session_id=session.session_id))
            store.mark_interrupted(sid)
        store.add_marker(chat, IMPORT_MARKER, data={"agent": "qwen", "turns": 2,
                                                    "session_id": session.session_id})
        [item] = import_sessions(store, home, ["qwen"]).imported
        assert item.conversation_id == chat and (item.turns_added, item.turns_updated) == (1, 0)
        assert [t.prompt for t in store.turns(chat)] == [t.prompt for t in session.turns]
    finally:
        store.close()


WRITER = """
import sys, time
source, target, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(source, "rb").read()
with open(target, "ab", buffering=0) as out:
    for start in range(0, len(data), step):
        out.write(data[start:start + step])  # cut anywhere: inside records, between them
        time.sleep(0.003)
"""


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini", "qwen"])
def test_imports_racing_a_writer_process_end_as_one_import_of_the_whole(
        agent: str, tmp_path: Path) -> None:
    """A second process appends the real session in 97-byte pieces while imports run over and
    over; after it is done, one more import. The store then holds exactly what a single import
    of the whole file stores: no turn twice, no text twice, every status right."""
    whole_home, home = tmp_path / "whole", tmp_path / "home"
    lay(whole_home, agent, "final")
    lay(home, agent, "final")
    source = session_file(whole_home, agent)
    target = session_file(home, agent)
    target.write_bytes(b"")
    store = Store(tmp_path / "t.sqlite3")
    reference = Store(tmp_path / "ref.sqlite3")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(source), str(target), "97"])
    try:
        runs = 0
        while writer.poll() is None or runs == 0:
            import_sessions(store, home, [agent])
            runs += 1
        assert writer.wait(30) == 0
        import_sessions(store, home, [agent])
        assert runs > 3, "the imports did race the writer"
        [mine] = store.list_conversations()
        [item] = import_sessions(reference, whole_home, [agent]).imported
        assert summary(store, mine.id) == summary(reference, item.conversation_id)
        assert len(store.turns(mine.id)) == 3
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        store.close()
        reference.close()


def test_tolaria_import_says_what_is_unfinished_and_what_it_continued(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "th")
    home = tmp_path / "home"

    def run() -> str:
        done = subprocess.run([sys.executable, "-m", "tolaria", "import", "--home", str(home),
                               "--from", "codex"], env=env, capture_output=True, text=True,
                              timeout=60, check=True)
        return done.stdout

    lay(home, "codex", "mid")
    assert "(1 turn, 1 interrupted (no answer in the session yet))" in run()
    lay(home, "codex", "final")
    assert "(2 turns, 1 continued, 1 interrupted (no answer in the session yet))" in run()
    assert "0 session(s) imported, 1 already here" in run()


def test_a_session_file_rewritten_shorter_changes_nothing_and_duplicates_nothing(
        tmp_path: Path) -> None:
    """The user edited the CLI's file (or the CLI rewrote it) with less in it: the store keeps
    what it has, says "unchanged", and the full file again adds nothing twice."""
    home = tmp_path / "home"
    lay(home, "qwen", "final")
    path = session_file(home, "qwen")
    whole = path.read_text()
    store = Store(tmp_path / "t.sqlite3")
    try:
        [item] = import_sessions(store, home, ["qwen"]).imported
        before = summary(store, item.conversation_id)
        path.write_text(whole.replace("Hello from the fake model!", "Hello"))
        assert import_sessions(store, home, ["qwen"]).unchanged == 1
        path.write_text(whole)
        assert import_sessions(store, home, ["qwen"]).unchanged == 1
        assert summary(store, item.conversation_id) == before
    finally:
        store.close()
