"""Checkpoints on real git repositories: snapshots never touch the user's index, branches or stash."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import git

from tolaria.core import checkpoints as ck

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def in_store(repo: Path, *args: str) -> str:
    """git in Tolaria's checkpoint store of ``repo`` (where the snapshots live)."""
    return git(repo, "--git-dir", str(ck.store_of(repo)), *args)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 31)))
    (root / "keep.txt").write_text("unchanged\n")
    (root / ".gitignore").write_text("ignored.log\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    return root


def user_state(repo: Path) -> tuple[str, str, str, str, str]:
    """Everything of the user's that a checkpoint must leave alone."""
    index = hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()
    return (index, git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
            git(repo, "branch", "-a"), git(repo, "stash", "list"), git(repo, "rev-parse", "HEAD"))


def test_not_a_git_folder_has_no_repo(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert ck.find_repo(plain) is None
    with pytest.raises(ck.CheckpointError, match="not inside a git working tree"):
        ck.snapshot(plain, ck.ref_name("1", "1", "before"))


def test_snapshot_records_untracked_and_staged_work_without_touching_the_user(repo: Path) -> None:
    (repo / "a.txt").write_text("staged edit\n")
    git(repo, "add", "a.txt")
    (repo / "new.txt").write_text("untracked\n")
    (repo / "ignored.log").write_text("noise\n")
    git(repo, "stash", "list")
    before_state = user_state(repo)

    cp = ck.snapshot(repo, ck.ref_name("7", "3", "before"))

    assert user_state(repo) == before_state
    assert cp.ref == "refs/tolaria/7/3/before"
    files = in_store(repo, "ls-tree", "-r", "--name-only", cp.commit).split()
    assert "new.txt" in files and "a.txt" in files and "ignored.log" not in files
    assert in_store(repo, "show", f"{cp.commit}:a.txt") == "staged edit\n"
    # The snapshot is nowhere in the user's repository: no ref, no commit, no object.
    assert git(repo, "for-each-ref") == git(repo, "for-each-ref", "refs/heads", "refs/tags")
    assert cp.commit not in git(repo, "log", "--all", "--format=%H")
    assert subprocess.run(["git", "-C", str(repo), "cat-file", "-e", cp.commit],
                          capture_output=True, check=False).returncode != 0
    # ... but in Tolaria's store, where `git log --all` does list it.
    assert cp.commit in in_store(repo, "log", "--all", "--format=%H")
    assert in_store(repo, "for-each-ref", "--format=%(refname)").split() == [cp.ref]
    assert ck.load(repo, cp.ref) == cp


def test_changes_diff_and_revert_of_a_turn(repo: Path) -> None:
    before = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    lines = (repo / "a.txt").read_text().splitlines(keepends=True)
    lines[1] = "changed near the top\n"
    lines[27] = "changed near the bottom\n"
    (repo / "a.txt").write_text("".join(lines))
    (repo / "created.py").write_text("print('hi')\n")
    (repo / "keep.txt").unlink()
    after = ck.snapshot(repo, ck.ref_name("1", "1", "after"))

    found = {c.path: c.status for c in ck.changes(before, after)}
    assert found == {"a.txt": "modified", "created.py": "added", "keep.txt": "deleted"}
    diff = ck.file_diff(before, after, "a.txt")
    parts = ck.hunks(diff)
    assert len(parts) == 2 and all(p.header.startswith("diff --git") for p in parts)

    # Revert only the second hunk: the top change stays, the bottom one is undone.
    ck.revert_hunk(before, "a.txt", parts[1])
    text = (repo / "a.txt").read_text()
    assert "changed near the top" in text and "changed near the bottom" not in text
    assert "line 28\n" in text
    # The same hunk again no longer applies: a clear error, the file untouched.
    with pytest.raises(ck.CheckpointError, match="no longer applies"):
        ck.revert_hunk(before, "a.txt", parts[1])
    assert (repo / "a.txt").read_text() == text

    ck.revert_file(before, "created.py")
    ck.revert_file(before, "keep.txt")
    assert not (repo / "created.py").exists()
    assert (repo / "keep.txt").read_text() == "unchanged\n"
    assert {c.path for c in ck.changes(before)} == {"a.txt"}


def test_rewind_restores_every_file_and_keeps_modes_and_the_index(repo: Path) -> None:
    script = repo / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    git(repo, "add", "run.sh")
    state = user_state(repo)
    before = ck.snapshot(repo, ck.ref_name("2", "5", "before"))
    script.write_text("#!/bin/sh\nrm -rf /tmp/nothing\n")
    script.chmod(0o644)
    (repo / "deep" / "er").mkdir(parents=True)
    (repo / "deep" / "er" / "x.txt").write_text("x\n")
    (repo / "a.txt").unlink()

    restored = ck.rewind(before)

    assert sorted(restored) == ["a.txt", "deep/er/x.txt", "run.sh"]
    assert script.read_text() == "#!/bin/sh\necho hi\n" and os.access(script, os.X_OK)
    assert not (repo / "deep" / "er" / "x.txt").exists()
    assert (repo / "a.txt").read_text().startswith("line 1\n")
    assert ck.changes(before) == []
    assert user_state(repo) == state


def test_a_repository_without_commits_and_ref_cleanup(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    (root / "f.txt").write_text("one\n")
    before = ck.snapshot(root, ck.ref_name("9", "1", "before"))
    (root / "f.txt").write_text("two\n")
    ck.snapshot(root, ck.ref_name("9", "1", "after"))
    assert [c.path for c in ck.changes(before)] == ["f.txt"]
    assert ck.delete(root, "refs/tolaria/9/") == 2
    assert ck.load(root, before.ref) is None
    assert in_store(root, "for-each-ref") == ""
    assert git(root, "status", "--porcelain") == "?? f.txt\n"


@pytest.mark.parametrize("bad", ["..", "a/b", "", "x.lock", "-rf", "a b"])
def test_ref_parts_are_validated(bad: str) -> None:
    with pytest.raises(ValueError, match="not a valid checkpoint ref part"):
        ck.ref_name("1", bad)


def test_paths_outside_the_tree_are_refused(repo: Path) -> None:
    before = ck.snapshot(repo, ck.ref_name("3", "1", "before"))
    with pytest.raises(ck.CheckpointError, match="outside the working tree"):
        ck.revert_file(before, "../escape.txt")


def test_a_checkpoints_entries_and_blobs_are_read_from_tolarias_store(repo: Path) -> None:
    """``tree_entries`` / ``blob_bytes`` (what tolaria/core/restore.py reads with): an untracked
    file's blob lives only in Tolaria's store, and comes back byte for byte; a file or folder
    named like a glob is taken literally; an object that is gone is a clear error."""
    data = b"\xff\xfe raw\r\nbytes\x00\n"
    (repo / "new.bin").write_bytes(data)
    (repo / "[ak].txt").write_text("literal\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "inner.txt").write_text("inner\n")
    os.symlink("a.txt", repo / "link")
    cp = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    found = {name: (mode, kind, sha) for mode, kind, sha, name in ck.tree_entries(
        cp, ["new.bin", "[ak].txt", "sub", "link", "absent.txt"])}
    assert set(found) == {"new.bin", "[ak].txt", "sub/inner.txt", "link"}
    assert found["link"][0] == "120000" and found["new.bin"][:2] == ("100644", "blob")
    sha = found["new.bin"][2]
    assert subprocess.run(["git", "-C", str(repo), "cat-file", "-e", sha],
                          capture_output=True, check=False).returncode != 0, \
        "the untracked file's blob is not in the user's repository"
    assert ck.blob_bytes(repo, sha) == data
    assert ck.blob_bytes(repo, found["link"][2]) == b"a.txt"
    assert ck.tree_entries(cp, []) == []
    with pytest.raises(ck.CheckpointError, match="gone from the repository"):
        ck.blob_bytes(repo, "0" * 40)
