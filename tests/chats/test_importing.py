"""Importing the CLIs' own sessions: real files the real CLIs wrote (tests/fixtures/sessions,
captured by tests/e2e/capture_sessions.py), a real store, the real ``tolaria import`` command."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli_env

from tolaria.chats.importers import IMPORTERS
from tolaria.chats.importers.model import Tool
from tolaria.chats.importing import IMPORT_MARKER, import_sessions
from tolaria.chats.service import ChatService
from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.events import Init, TextDelta, ToolDone, ToolStart
from tolaria.core.store.db import Store
from tolaria.ui.transcript.turn_model import Ending, ending_line

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT / "tests" / "fixtures" / "sessions"
AGENTS = ["claude", "codex", "gemini", "qwen", "opencode"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """One home with every CLI's captured files, as a user who used all five would have."""
    target = tmp_path / "home"
    for agent in AGENTS:
        shutil.copytree(SESSIONS / agent, target, dirs_exist_ok=True)
    return target


def digest(folder: Path) -> dict[str, tuple[str, float]]:
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(),
                                        p.stat().st_mtime)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("agent", AGENTS)
def test_each_cli_session_reads_as_its_two_turns(agent: str) -> None:
    importer = IMPORTERS[agent]
    [path] = list(importer.find(SESSIONS / agent))
    [session] = importer.read(path)
    assert session.agent == agent and session.cwd == "/home/user/work"
    assert session.session_id and session.bad_lines == 0
    first, second = session.turns
    assert "E2E-TEXT: say hello" in first.prompt and "E2E-ECHO: run echo hi" in second.prompt
    assert first.items == ["Hello from the fake model!"]
    texts = [i for i in second.items if isinstance(i, str)]
    tools = [i for i in second.items if isinstance(i, Tool)]
    assert texts[0] == "I'll run it." and texts[-1].startswith("The command printed:")
    [tool] = tools
    assert "echo hi" in json.dumps(tool.input) and tool.output is not None and "hi" in tool.output
    assert not tool.is_error


def test_import_stores_chats_that_resume_natively_and_is_idempotent(home: Path,
                                                                    tmp_path: Path) -> None:
    before = digest(home)
    store = Store(tmp_path / "t.sqlite3")
    try:
        report = import_sessions(store, home)
        assert sorted(i.agent for i in report.imported) == sorted(AGENTS)
        assert not report.skipped and report.unchanged == 0
        chats = {c.agent: c for c in store.list_conversations()}
        assert set(chats) == set(AGENTS)
        adapters = load_adapters()
        for item in report.imported:
            chat = chats[item.agent]
            assert chat.id == item.conversation_id and chat.cwd == "/home/user/work"
            turns = store.turns(chat.id)
            assert [t.status for t in turns] == ["completed", "completed"]
            assert all(t.session_id == item.session_id for t in turns)
            events = store.events(turns[1].id)
            assert isinstance(events[0], Init)
            assert any(isinstance(e, ToolStart) for e in events)
            done = next(e for e in events if isinstance(e, ToolDone))
            assert "hi" in done.output and not done.is_error
            text = "".join(e.text for e in events if isinstance(e, TextDelta))
            assert text.startswith("I'll run it.") and "The command printed:" in text
            # The next turn continues the CLI's own session (its manifest can resume).
            next_turn = ChatService(store).next_turn(chat, "and now?", adapters.get(item.agent))
            assert next_turn.resume_id == item.session_id and next_turn.full_prompt == "and now?"
            [marker] = store.markers(chat.id, IMPORT_MARKER)
            assert marker.data["session_id"] == item.session_id and marker.data["turns"] == 2

        again = import_sessions(store, home)
        assert again.imported == [] and again.unchanged == len(AGENTS)
        assert len(store.list_conversations()) == len(AGENTS)
    finally:
        store.close()
    assert digest(home) == before  # the CLIs' files were only read


def test_imported_turns_keep_the_cli_s_own_times(home: Path, tmp_path: Path) -> None:
    """An imported turn starts when the CLI's prompt record says and lasted as long as its records
    say (not "Completed in 0.0 s" at the moment of the import)."""
    store = Store(tmp_path / "t.sqlite3")
    try:
        imported_at = time.time()
        import_sessions(store, home)
        durations: list[int | None] = []
        for chat in store.list_conversations():
            importer = IMPORTERS[chat.agent]
            [path] = list(importer.find(SESSIONS / chat.agent))
            [session] = importer.read(path)
            for stored, read in zip(store.turns(chat.id), session.turns, strict=True):
                assert read.started_at is not None and read.ended_at is not None, chat.agent
                assert stored.started_at == pytest.approx(read.started_at), chat.agent
                assert stored.started_at < imported_at - 3600  # captured well before this test
                assert stored.duration_ms == round((read.ended_at - read.started_at) * 1000)
                durations.append(stored.duration_ms)
        # The captured answers took from 0 (Gemini stamps its answer when it starts) to ~10 s.
        assert max(d or 0 for d in durations) > 1000
        # A turn whose records carry no time says no duration at all rather than a made-up one.
        unstamped = tmp_path / "unstamped" / ".qwen"
        shutil.copytree(home / ".qwen", unstamped)
        [path] = list(IMPORTERS["qwen"].find(unstamped.parent))
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            record.pop("timestamp", None)
            record["sessionId"] = "no-times"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        import_sessions(store, unstamped.parent, ["qwen"])
        chat = next(c for c in store.list_conversations()
                    if store.turns(c.id)[0].session_id == "no-times")
        for stored in store.turns(chat.id):
            assert stored.status == "completed" and stored.duration_ms is None
            assert stored.started_at >= imported_at
            assert ending_line(Ending(stored.status, stored.duration_ms))[0] == "Completed"
    finally:
        store.close()


def grow_qwen_session(home: Path, prompt: str) -> None:
    """Append a user message to the Qwen session under ``home``, as the CLI does when it goes on."""
    [path] = list(IMPORTERS["qwen"].find(home))
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record.update(uuid="later", timestamp="2026-12-04T10:00:00.000Z",
                  message={"role": "user", "parts": [{"text": prompt}]})
    path.write_text("\n".join([*lines, json.dumps(record)]) + "\n")


def test_a_session_that_grew_adds_only_its_new_turns(home: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3")
    try:
        import_sessions(store, home, ["qwen"])
        grow_qwen_session(home, "a third question")
        report = import_sessions(store, home, ["qwen"])
        [item] = report.imported
        assert item.turns_added == 1
        [chat] = store.list_conversations()
        assert [t.prompt for t in store.turns(chat.id)][-1] == "a third question"
    finally:
        store.close()


def test_malformed_files_are_reported_and_skipped(home: Path, tmp_path: Path) -> None:
    projects = home / ".claude" / "projects" / "-broken"
    projects.mkdir(parents=True)
    (projects / "empty.jsonl").write_text("")
    (projects / "garbage.jsonl").write_text("not json\n{\"also\": \n")
    (projects / "no-prompt.jsonl").write_text(json.dumps({"type": "assistant"}) + "\n")
    os.mkfifo(projects / "fifo.jsonl")  # must not hang the import
    (home / ".codex" / "sessions" / "2026" / "12" / "03" / "rollout-x.jsonl").write_bytes(
        b"\xff\xfe\x00 binary \x00\n")
    db = home / ".local" / "share" / "opencode" / "opencode.db"
    db.write_bytes(b"this is not sqlite" * 100)
    good = next(IMPORTERS["gemini"].find(home))
    good.write_text(good.read_text() + "{truncated mid-line\n")
    store = Store(tmp_path / "t.sqlite3")
    try:
        report = import_sessions(store, home)
    finally:
        store.close()
    reasons = {p.name: why for p, why in report.skipped}
    assert set(reasons) == {"empty.jsonl", "garbage.jsonl", "no-prompt.jsonl", "fifo.jsonl",
                            "rollout-x.jsonl", "opencode.db"}
    assert reasons["fifo.jsonl"] == "not a regular file"
    assert "no user prompt" in reasons["no-prompt.jsonl"]
    assert "not an opencode database" in reasons["opencode.db"]
    assert {i.agent for i in report.imported} == {"claude", "codex", "gemini", "qwen"}
    assert report.bad_lines == 1  # the truncated gemini line; the rest of that file imported


def test_tolaria_import_command(home: Path, tmp_path: Path) -> None:
    env = cli_env(tmp_path / "th")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tolaria", "import", *args], env=env,
                              capture_output=True, text=True, timeout=60, check=False)

    dry = run("--home", str(home), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "5 session(s) would import" in dry.stdout
    first = run("--home", str(home), "--from", "claude", "--from", "codex")
    assert first.returncode == 0, first.stderr
    assert "imported Claude Code session 3f433ab6-a36" in first.stdout
    assert "2 session(s) imported, 0 already here" in first.stdout
    again = run("--home", str(home), "--json")
    report = json.loads(again.stdout)
    assert {i["agent"] for i in report["imported"]} == {"gemini", "qwen", "opencode"}
    assert report["unchanged"] == 2 and report["skipped"] == []
    chats = subprocess.run([sys.executable, "-m", "tolaria", "chats", "--json"], env=env,
                           capture_output=True, text=True, timeout=60, check=True)
    assert len(json.loads(chats.stdout)) == 5
    missing = run("--home", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "is not a folder" in missing.stdout
