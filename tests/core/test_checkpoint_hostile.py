"""Git runs nothing of the repository's (issue 21 item 2): every checkpoint operation and the
chat worktrees in a repository that configures every command git could run, in its config, an
included config, its attributes and a global config under HOME. Filtered files (an LFS-like
clean/smudge pair) are snapshotted from their work-tree bytes, never from the cleaned blob."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hostile_git import make_hostile, plain_git

from tolaria.chats import worktrees
from tolaria.core import checkpoints as ck

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    root = tmp_path / "proj"
    root.mkdir()
    plain_git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 31)))
    (root / "b.dat").write_bytes(b"data\n")
    plain_git(root, "add", "-A")
    plain_git(root, "commit", "-qm", "first")
    home = tmp_path / "home"
    marker = make_hostile(root, home)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return root, marker


def test_every_checkpoint_operation_runs_nothing_of_the_repository(
        hostile: tuple[Path, Path]) -> None:
    repo, marker = hostile
    before = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    lines = (repo / "a.txt").read_text().splitlines(keepends=True)
    lines[1], lines[27] = "top\n", "bottom\n"
    (repo / "a.txt").write_text("".join(lines))
    (repo / "new.txt").write_text("new\n")
    (repo / "b.dat").write_bytes(b"changed\n")
    after = ck.snapshot(repo, ck.ref_name("1", "1", "after"))
    assert {c.path for c in ck.changes(before, after)} == {"a.txt", "new.txt", "b.dat"}
    assert ck.changes(before)  # against the tree now: another snapshot
    diff = ck.file_diff(before, after, "a.txt")
    assert "+top" in diff and "textconv" not in diff
    parts = ck.hunks(ck.file_diff_bytes(before, after, "a.txt"))
    ck.revert_hunk(before, "a.txt", parts[1])
    assert "bottom" not in (repo / "a.txt").read_text()
    ck.revert_file(before, "b.dat")
    assert (repo / "b.dat").read_bytes() == b"data\n"
    ck.rewind(before)
    assert not (repo / "new.txt").exists()
    assert ck.load(repo, before.ref) == before
    assert ck.delete(repo, "refs/tolaria/1/") == 2
    assert not marker.exists(), marker.read_text()
    # The control: the user's own git in this repository does run the marker.
    (repo / "a.txt").write_text("edit\n")
    subprocess.run(["git", "-C", str(repo), "add", "a.txt"], capture_output=True, check=False,
                   env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")})
    assert "clean" in marker.read_text()


def test_chat_worktrees_run_no_hook_and_no_filter(hostile: tuple[Path, Path]) -> None:
    repo, marker = hostile
    made = worktrees.create(repo, 5)
    # Checked out without the smudge filter: the files as committed.
    assert (made.path / "a.txt").read_text().startswith("line 1\n")
    assert (made.path / "b.dat").read_bytes() == b"data\n"
    worktrees.remove(made)
    assert not made.path.exists()
    assert not marker.exists(), marker.read_text()


def test_filtered_files_are_snapshotted_from_their_work_tree_bytes(tmp_path: Path) -> None:
    """An LFS-like filter: the user's own git stores ``CLEANED:`` blobs. Tolaria's snapshot of
    an unchanged filtered file must hold the real bytes, so a revert never writes the cleaned
    blob over the real file; one too big to hash is left out and never touched."""
    repo = tmp_path / "lfs"
    repo.mkdir()
    plain_git(repo, "init", "-q", "-b", "main")
    plain_git(repo, "config", "filter.fake.clean", "sed s/^/CLEANED:/")
    plain_git(repo, "config", "filter.fake.smudge", "sed s/^CLEANED://")
    (repo / ".gitattributes").write_text("*.bin filter=fake\n")
    (repo / "model.bin").write_text("real weights\n")
    (repo / "big.bin").write_bytes(b"x" * 2048 + b"\n")
    plain_git(repo, "add", "-A")
    plain_git(repo, "commit", "-qm", "lfs")
    assert plain_git(repo, "cat-file", "-p", "HEAD:model.bin") == "CLEANED:real weights\n"
    limits = ck.Limits(max_file_bytes=1024)
    before = ck.snapshot(repo, ck.ref_name("2", "1", "before"), limits=limits)
    assert before.skipped is not None and before.skipped.filtered == ("big.bin",)
    (repo / "model.bin").write_text("agent's weights\n")
    (repo / "big.bin").write_bytes(b"y" * 2048 + b"\n")
    after = ck.snapshot(repo, ck.ref_name("2", "1", "after"), limits=limits)
    assert [(c.path, c.status) for c in ck.changes(before, after)] == [("model.bin", "modified")]
    assert "-real weights" in ck.file_diff(before, after, "model.bin")
    ck.revert_file(before, "model.bin")
    assert (repo / "model.bin").read_text() == "real weights\n"
    with pytest.raises(ck.CheckpointError, match=r"big\.bin was not captured"):
        ck.revert_file(before, "big.bin")
    assert (repo / "big.bin").read_bytes() == b"y" * 2048 + b"\n"
    assert "filtered (LFS)" in before.skipped.summary()
