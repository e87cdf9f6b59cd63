"""A git worktree per chat (tolaria/chats/worktrees.py) on real repositories: made beside the
repository on its own branch, the chat's subfolder kept; removal never forced: git's refusal
over uncommitted work is said and the files stay; clear errors outside git."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import git, git_repo

from tolaria.chats import worktrees
from tolaria.chats.worktrees import WorktreeError
from tolaria.core.store.db import Store

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = git_repo(tmp_path / "proj", {"a.txt": "a\n"})
    (root / "src").mkdir()
    (root / "src" / "m.py").write_text("x = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "src")
    return root


def test_a_worktree_beside_the_repo_on_its_own_branch(repo: Path, store: Store) -> None:
    status = git(repo, "status", "--porcelain")
    made = worktrees.create(repo / "src", 7)
    assert made.path == repo.parent / "proj-tolaria-7" and made.branch == "tolaria/chat-7"
    assert made.folder == made.path / "src" and (made.folder / "m.py").read_text() == "x = 1\n"
    assert git(made.path, "rev-parse", "--abbrev-ref", "HEAD").strip() == "tolaria/chat-7"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main", "user's checkout"
    assert git(repo, "status", "--porcelain") == status

    chat = store.create_conversation("c", "demo", str(made.folder))
    worktrees.record(store, chat.id, made)
    assert worktrees.recorded(store, chat.id) == made
    assert worktrees.every_recorded(store) == {chat.id: made}

    with pytest.raises(WorktreeError, match="already exists"):
        worktrees.create(repo, 7)

    (made.path / "a.txt").write_text("the agent's work\n")
    (made.path / "new.txt").write_text("untracked\n")
    with pytest.raises(WorktreeError) as refused:
        worktrees.remove(made)
    assert str(refused.value) == (f"kept the worktree {made.path}: it has uncommitted or "
                                  "untracked files (commit or move them, then remove it)")
    assert (made.path / "a.txt").read_text() == "the agent's work\n", "nothing lost"

    git(made.path, "add", "-A")
    git(made.path, "commit", "-qm", "the chat's work")
    worktrees.remove(made)
    assert not made.path.exists()
    assert "tolaria/chat-7" in git(repo, "branch", "--list", "tolaria/chat-7"), (
        "the branch (and the chat's commits) stay")
    worktrees.remove(made)  # already gone: nothing to do


def test_no_worktree_outside_git_or_without_a_commit(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorktreeError, match="is not inside a git repository"):
        worktrees.create(plain, 1)
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(WorktreeError, match="has no commit yet"):
        worktrees.create(empty, 1)
    assert not any(p.name.endswith("-tolaria-1") for p in tmp_path.iterdir())
