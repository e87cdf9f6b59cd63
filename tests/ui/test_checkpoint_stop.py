"""Stop during a turn's before-snapshot stops at once in the window (issue 21 item 4): the
snapshot's git is killed, the agent never starts, the turn ends cancelled. What a snapshot left
out is said under the turn."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil
import pytest
from helpers import git, git_repo
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp, edit_turn, row_of, save_shot

from tolaria.core import checkpoints as ck

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def snapshot_git() -> psutil.Process | None:
    for child in psutil.Process().children(recursive=True):
        try:
            if "hash-object" in " ".join(child.cmdline()):
                return child
        except psutil.Error:
            continue
    return None


def test_stop_during_the_before_snapshot_stops_at_once(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path, home: Path) -> None:
    repo = git_repo(tmp_path / "proj", {"a.txt": "original\n"})
    with (repo / "random.bin").open("wb") as out:  # hashed and compressed: a slow snapshot
        chunk = os.urandom(ck.MB)
        for n in range(160):
            out.write(chunk[::-1] if n % 2 else chunk)
    (home / "settings.toml").write_text(
        "[checkpoints]\nmax_file_mb = 2000.0\nmax_total_mb = 2000.0\ntime_budget_seconds = 600.0\n")
    drv = start_app(cwd=str(repo))
    stream = edit_turn(drv, "change", {"a.txt": "the agent ran\n"})
    qtbot.waitUntil(lambda: snapshot_git() is not None, timeout=20_000)
    busy = snapshot_git()
    assert busy is not None
    assert drv.app.controller.stop(drv.pane.conversation_id) is True
    drv.wait_finished(timeout_ms=10_000)
    assert drv.stored_turn(stream).status == "cancelled"
    qtbot.waitUntil(lambda: not busy.is_running() or busy.status() == psutil.STATUS_ZOMBIE,
                    timeout=5_000)
    assert (repo / "a.txt").read_text() == "original\n", "the agent never started"
    # Killed, not finished: no checkpoint was stored.
    assert git(repo, f"--git-dir={ck.store_of(repo)}", "for-each-ref") == ""


def test_what_a_snapshot_left_out_is_shown_under_the_turn(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "proj", {"a.txt": "original\n"})
    (repo / "node_modules" / "left-pad").mkdir(parents=True)
    (repo / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1\n")
    with (repo / "dump.sql").open("wb") as out:
        out.truncate(12 * ck.MB)
    drv = start_app(cwd=str(repo))
    stream = edit_turn(drv, "change", {"a.txt": "changed\n"})
    drv.wait_finished()
    row = row_of(drv, stream)
    qtbot.waitUntil(lambda: row.note.isVisible(), timeout=10_000)
    assert row.note.text() == "not tracked: 1 file over 10 MB (dump.sql), node_modules/"
    view = drv.pane.transcript.turn(stream)
    assert view is not None
    save_shot(view, tmp_path, "turn-not-tracked.png")
