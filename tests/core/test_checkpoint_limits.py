"""Cheap whatever is in the folder, and never fatal (issue 21 items 4 and 5): untracked files over
the size cap, heavy folders, files beyond the count/bytes budget and a spent time budget are left
out and said; a diff never calls a left-out file deleted and a revert never deletes one; a
Latin-1 file reverts by hunk byte for byte; a snapshot is killed at once when cancelled."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from hostile_git import committed_repo, plain_git

from tolaria.core import checkpoints as ck

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return committed_repo(tmp_path / "proj")


def tree_files(cp: ck.Checkpoint) -> set[str]:
    out = plain_git(cp.repo, "--git-dir", str(ck.store_of(cp.repo)), "ls-tree", "-r",
                    "--name-only", cp.commit)
    return set(out.split())


def test_a_big_untracked_file_is_left_out_said_and_never_deleted(repo: Path) -> None:
    with (repo / "disk.iso").open("wb") as out:
        out.truncate(11 * ck.MB)  # sparse: 11 MB to git, nothing on disk
    (repo / "small.txt").write_text("small\n")
    before = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    assert before.skipped is not None
    assert before.skipped.large == ("disk.iso",)
    assert before.skipped.summary() == "not tracked: 1 file over 10 MB (disk.iso)"
    assert tree_files(before) == {"a.txt", "small.txt"}
    (repo / "disk.iso").unlink()
    (repo / "disk.iso").write_text("now small\n")  # the agent shrinks it: now captured
    (repo / "a.txt").write_text("edited\n")
    after = ck.snapshot(repo, ck.ref_name("1", "1", "after"))
    # Not "added": before did not hold it, it may have existed.
    assert [(c.path, c.status) for c in ck.changes(before, after)] == [("a.txt", "modified")]
    with pytest.raises(ck.CheckpointError, match="not captured before this turn"):
        ck.revert_file(before, "disk.iso")
    assert (repo / "disk.iso").read_text() == "now small\n"
    assert "disk.iso" not in ck.rewind(before)
    assert (repo / "disk.iso").read_text() == "now small\n"


def test_heavy_folders_that_are_not_ignored_are_left_out(repo: Path) -> None:
    for folder in ("node_modules/left-pad", "web/node_modules/react", ".venv/lib", "target/x"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "index.js").write_text("module.exports = 1\n")
    (repo / "web" / "app.js").write_text("app\n")
    cp = ck.snapshot(repo, ck.ref_name("2", "1", "before"))
    assert cp.skipped is not None
    assert set(cp.skipped.heavy) == {"node_modules/", "web/node_modules/", ".venv/", "target/"}
    assert tree_files(cp) == {"a.txt", "web/app.js"}
    assert "node_modules/" in cp.skipped.summary()
    (repo / "node_modules" / "left-pad" / "index.js").unlink()
    assert ck.changes(cp) == [], "a change in a left-out folder is not the turn's"


def test_the_budget_takes_whole_entries_smallest_first_the_same_way_each_time(
        repo: Path) -> None:
    (repo / "data").mkdir()
    for n in range(6):
        (repo / "data" / f"{n}.csv").write_text(f"{n}\n")
    (repo / "small").mkdir()
    (repo / "small" / "s.txt").write_text("s\n")
    (repo / "z.txt").write_text("z\n")
    limits = ck.Limits(max_files=3)
    before = ck.snapshot(repo, ck.ref_name("3", "1", "before"), limits=limits)
    assert before.skipped is not None
    # The big folder is left out whole; the new file and the small folder are taken.
    assert before.skipped.over_budget == ("data/",)
    assert tree_files(before) == {"a.txt", "small/s.txt", "z.txt"}
    assert before.skipped.summary() == "not tracked: 1 file beyond the per-turn budget"
    (repo / "data" / "00.csv").write_text("new, sorts first\n")
    (repo / "new.txt").write_text("the agent's new file\n")
    after = ck.snapshot(repo, ck.ref_name("3", "1", "after"), limits=limits)
    # Nothing of the left-out folder is a change of the turn; the new file is.
    assert [(c.path, c.status) for c in ck.changes(before, after)] == [("new.txt", "added")]
    with pytest.raises(ck.CheckpointError, match="not captured before this turn"):
        ck.revert_file(before, "data/0.csv")
    assert (repo / "data" / "0.csv").read_text() == "0\n"
    tiny = ck.snapshot(repo, ck.ref_name("3", "2", "before"), limits=ck.Limits(max_bytes=1))
    assert tiny.skipped is not None and "beyond the per-turn budget" in tiny.skipped.summary()


def test_past_the_time_budget_only_tracked_files_are_captured(repo: Path) -> None:
    (repo / "new.txt").write_text("new\n")
    before = ck.snapshot(repo, ck.ref_name("4", "1", "before"),
                         limits=ck.Limits(time_budget_s=0))
    assert before.skipped is not None and before.skipped.untracked_off
    assert "only tracked files captured" in before.skipped.summary()
    assert tree_files(before) == {"a.txt"}
    (repo / "a.txt").write_text("tracked edit\n")
    after = ck.snapshot(repo, ck.ref_name("4", "1", "after"))
    assert [(c.path, c.status) for c in ck.changes(before, after)] == [("a.txt", "modified")]
    # Read back from the stored commit, as a rebuilt Checkpoint does.
    assert ck.skipped_of(ck.Checkpoint(repo, before.commit, "")).untracked_off


def test_a_latin1_file_reverts_by_hunk_byte_for_byte(repo: Path) -> None:
    original = b"".join(b"caf\xe9 ligne %d\n" % i for i in range(1, 31))
    (repo / "latin1.txt").write_bytes(original)
    plain_git(repo, "add", "latin1.txt")
    before = ck.snapshot(repo, ck.ref_name("5", "1", "before"))
    lines = original.splitlines(keepends=True)
    lines[1] = b"d\xe9but chang\xe9\n"
    lines[27] = b"fin chang\xe9e \xff\n"
    (repo / "latin1.txt").write_bytes(b"".join(lines))
    after = ck.snapshot(repo, ck.ref_name("5", "1", "after"))
    parts = ck.hunks(ck.file_diff_bytes(before, after, "latin1.txt"))
    assert len(parts) == 2 and b"\xe9" in parts[1].raw
    ck.revert_hunk(before, "latin1.txt", parts[1])
    expected = lines[:]
    expected[27] = original.splitlines(keepends=True)[27]
    assert (repo / "latin1.txt").read_bytes() == b"".join(expected)
    ck.revert_hunk(before, "latin1.txt", parts[0])
    assert (repo / "latin1.txt").read_bytes() == original


def cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def test_a_cancelled_snapshot_kills_git_at_once(repo: Path) -> None:
    with (repo / "random.bin").open("wb") as out:  # slow to compress: git is busy a while
        chunk = os.urandom(ck.MB)
        for _ in range(96):
            out.write(chunk[::-1] if _ % 2 else chunk)
    cancel = ck.Cancel()
    outcome: list[BaseException | ck.Checkpoint] = []

    def take() -> None:
        try:
            outcome.append(ck.snapshot(repo, ck.ref_name("6", "1", "before"), cancel=cancel,
                                       limits=ck.Limits(max_file_bytes=1024 * ck.MB,
                                                        max_bytes=1024 * ck.MB,
                                                        time_budget_s=600)))
        except ck.CheckpointError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=take)
    worker.start()
    me = psutil.Process()
    busy = None
    for _ in range(600):  # git hashing the big file, seen from outside
        busy = next((p for p in me.children(recursive=True)
                     if "hash-object" in cmdline(p)), None)
        if busy is not None or not worker.is_alive():
            break
        time.sleep(0.02)
    assert busy is not None, f"the snapshot ended before it could be cancelled: {outcome}"
    cancel.set()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], ck.CheckpointCancelled)
    assert not busy.is_running() or busy.status() == psutil.STATUS_ZOMBIE
    assert plain_git(repo, "--git-dir", str(ck.store_of(repo)), "for-each-ref") == ""


def test_the_untracked_stat_cache_never_keeps_old_content(repo: Path) -> None:
    notes = repo / "notes.txt"
    notes.write_text("version 1\n")
    old = time.time_ns() - 60 * 1_000_000_000
    os.utime(notes, ns=(old, old))
    first = ck.snapshot(repo, ck.ref_name("7", "1", "before"))
    time.sleep(2.1)  # the file's change time is no longer "racy": this snapshot caches it
    second = ck.snapshot(repo, ck.ref_name("7", "2", "before"))
    assert ck.changes(first, second) == []
    notes.write_text("version 2\n")  # same size, and the modification time put back
    os.utime(notes, ns=(old, old))
    third = ck.snapshot(repo, ck.ref_name("7", "3", "before"))
    assert [c.path for c in ck.changes(second, third)] == ["notes.txt"]
    store = ck.store_of(repo)
    assert plain_git(repo, "--git-dir", str(store), "show", f"{third.commit}:notes.txt") \
        == "version 2\n"


def test_a_same_size_edit_in_the_second_of_the_last_git_add_is_not_missed(repo: Path) -> None:
    """git compares whole seconds: a file rewritten (same size) in the second of the ``git add``
    that wrote the index looks unchanged, unless git sees the entry is "racily clean" (not
    older than the index file). The snapshot's index copy must keep that knowledge."""
    tracked = repo / "same.txt"
    time.sleep(1 - time.time() % 1 + 0.01)  # a fresh second: all three steps fit in it
    tracked.write_bytes(b"version one\n")
    plain_git(repo, "add", "same.txt")
    tracked.write_bytes(b"version two\n")  # same size, same second, same inode
    time.sleep(1.1)  # the snapshot comes a second later, as the next turn's would
    before = ck.snapshot(repo, ck.ref_name("6", "1", "before"))
    shown = plain_git(repo, "--git-dir", str(ck.store_of(repo)), "show",
                      f"{before.commit}:same.txt")
    assert shown == "version two\n"


def test_a_blob_the_stat_cache_reuses_survives_a_prune_from_another_process(repo: Path) -> None:
    """A snapshot that takes an untracked file's blob from the stat cache marks it as just used
    (as git does when it writes an object it already has). A prune in another process that
    worked out what is reachable before that snapshot's ref existed (here: it is told to drop
    that ref) keeps it, within its grace period: the checkpoint (an Undo's safety copy, say)
    keeps the file's bytes."""
    notes = repo / "notes.txt"
    notes.write_text("the only copy of these notes\n")
    time.sleep(2.1)  # not "racy" any more: the first snapshot caches the file's blob
    ck.snapshot(repo, ck.ref_name("8", "1", "before"))
    ck.delete(repo, "refs/tolaria/8/")  # its chat was deleted: the blob is unreachable ...
    store = ck.store_of(repo)
    old = time.time() - 3600
    for folder, _dirs, files in os.walk(store / "objects"):  # ... and an hour old
        for name in files:
            os.utime(os.path.join(folder, name), (old, old))
    taken = ck.snapshot(repo, ck.ref_name("9", "1", "before"))  # reuses the cached blob
    script = ("import sys; from pathlib import Path; from tolaria.core.checkpoints import "
              "storage; storage.prune(Path(sys.argv[1]), lambda ref: True)")
    subprocess.run([sys.executable, "-c", script, str(store)], check=True, timeout=60,
                   capture_output=True, stdin=subprocess.DEVNULL)
    shown = plain_git(repo, "--git-dir", str(store), "show", f"{taken.commit}:notes.txt")
    assert shown == "the only copy of these notes\n"
