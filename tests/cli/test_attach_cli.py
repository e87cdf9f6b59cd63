"""``tolaria run --attach FILE`` (issue 26 item 5): the same checks and refusals as the window,
before anything is saved or started (exit 2, one line naming the agent or the file), and
``--json`` events saying what was attached and how."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from attachfiles import write_png
from helpers import cli_env

from tolaria.core.store.db import Store


def tolaria(home: Path, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tolaria", *args], env=cli_env(home), cwd=work,
                          capture_output=True, text=True, timeout=60, check=False)


def _chats(home: Path) -> int:
    db = home / "data" / "tolaria.sqlite3"
    if not db.exists():
        return 0
    store = Store(db)
    try:
        return len(store.list_conversations())
    finally:
        store.close()


def test_an_image_for_an_agent_without_images_exits_2_before_anything(
        tmp_path: Path, work: Path) -> None:
    home = tmp_path / "home"
    write_png(tmp_path / "shot.png")
    done = tolaria(home, work, "run", "--agent", "demo", "--attach", str(tmp_path / "shot.png"),
                   "what is this?")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "tolaria: Demo agent (offline) cannot take images: shot.png was not sent (pick an agent "
        "that can see images, or remove it)"]
    assert done.stdout == "" and _chats(home) == 0


def test_hostile_files_exit_2_with_one_line_each(tmp_path: Path, work: Path) -> None:
    home = tmp_path / "home"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    (tmp_path / "fake.png").write_text("not an image")
    for path, said in (("/dev/zero", "/dev/zero is a device, not a file"),
                       (str(fifo), "is a FIFO (named pipe), not a file"),
                       (str(tmp_path / "fake.png"), "fake.png is named like an image"),
                       (str(tmp_path / "gone.txt"), "gone.txt: no such file"),
                       (str(tmp_path), "is a folder"),
                       (str(tmp_path / "a\nb.txt"), "the path holds a line break")):
        done = tolaria(home, work, "run", "--agent", "demo", "--attach", path, "hi")
        assert done.returncode == 2, (path, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tolaria: ") and said in lines[0], lines
    assert _chats(home) == 0


def test_json_events_say_what_was_attached_and_how(tmp_path: Path, work: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "notes.txt").write_text("hello notes\n")
    done = tolaria(home, work, "run", "--json", "--agent", "demo", "--attach",
                   str(tmp_path / "notes.txt"), "summarise")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    attached = [e for e in events if e["kind"] == "attached"]
    assert len(attached) == 1
    assert attached[0]["name"] == "notes.txt" and attached[0]["form"] == "path"
    assert attached[0]["how"] == "as a path to a private copy" and attached[0]["size"] == 12
    # The turn keeps it: a chat with one turn, its attachment in the store.
    store = Store(home / "data" / "tolaria.sqlite3")
    try:
        (chat,) = store.list_conversations()
        (turn,) = store.turns(chat.id)
        assert [a.name for a in store.attachments(turn.id)] == ["notes.txt"]
    finally:
        store.close()
    # Text output says it too, on stderr.
    again = tolaria(home, work, "run", "--agent", "demo", "--attach",
                    str(tmp_path / "notes.txt"), "summarise")
    assert "[attached notes.txt (12 bytes) as a path to a private copy]" in again.stderr
