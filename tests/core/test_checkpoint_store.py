"""Where checkpoints live (issue 21 item 3, ADR 0010): in Tolaria's own store, which borrows the
user's objects; nothing of a checkpoint (an untracked ``.env``) leaves the machine with a
``git push --mirror`` or a mirror clone; linked worktrees share one store; an object the user's
``git gc`` pruned is a clear error naming the file; an earlier Tolaria's refs in the repository
stay readable and go with their chat."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from hostile_git import committed_repo, plain_git

from tolaria.core import checkpoints as ck
from tolaria.support import paths

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
SECRET = "API_KEY=sk-live-do-not-publish\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return committed_repo(tmp_path / "proj")


def has_object(git_dir: Path, sha: str) -> bool:
    return subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "-e", sha],
                          capture_output=True, check=False).returncode == 0


def test_push_mirror_and_mirror_clone_carry_no_checkpoint(repo: Path, tmp_path: Path) -> None:
    (repo / ".env").write_text(SECRET)  # untracked, not ignored: a checkpoint holds it
    cp = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    secret_blob = plain_git(repo, "hash-object", ".env").strip()
    store = ck.store_of(repo)
    assert has_object(store, secret_blob) and has_object(store, cp.commit)
    assert store.is_relative_to(paths.data_dir())
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700, "private: it holds .env files"

    remote = tmp_path / "remote.git"
    plain_git(tmp_path, "init", "-q", "--bare", str(remote))
    plain_git(repo, "push", "-q", "--mirror", str(remote))
    mirror = tmp_path / "mirror.git"
    plain_git(tmp_path, "clone", "-q", "--mirror", str(repo), str(mirror))
    for published in (remote, mirror):
        refs = plain_git(published, "for-each-ref", "--format=%(refname)").split()
        assert refs == ["refs/heads/main"], refs
        assert not has_object(published, cp.commit)
        assert not has_object(published, secret_blob)
    # Not in the user's repository at all, so `git log --all` there does not list it.
    assert not has_object(repo / ".git", secret_blob)
    assert cp.commit not in plain_git(repo, "log", "--all", "--format=%H")


def test_a_linked_worktree_shares_the_store_and_uses_its_own_index(
        repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    plain_git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    (linked / "a.txt").write_text("staged in the worktree\n")
    plain_git(linked, "add", "a.txt")
    assert ck.store_of(linked) == ck.store_of(repo)
    before = ck.snapshot(linked, ck.ref_name("2", "1", "before"))
    assert before.repo == linked
    (linked / "b.txt").write_text("b\n")
    assert [c.path for c in ck.changes(before)] == ["b.txt"]
    assert ck.load(linked, before.ref) == before
    ck.revert_file(before, "b.txt")
    assert not (linked / "b.txt").exists()
    assert (repo / "a.txt").read_text() == "a\n", "the main work tree untouched"


def test_content_pruned_by_the_users_gc_is_a_clear_error_not_a_wrong_file(repo: Path) -> None:
    (repo / "a.txt").write_text("staged only: the blob lives in the user's objects\n")
    plain_git(repo, "add", "a.txt")
    before = ck.snapshot(repo, ck.ref_name("3", "1", "before"))
    staged = plain_git(repo, "rev-parse", ":a.txt").strip()
    # Borrowed through the alternates, not copied: only the user's objects hold it.
    assert not (ck.store_of(repo) / "objects" / staged[:2] / staged[2:]).exists()
    # The user unstages, edits, and prunes: that blob is gone from their objects.
    plain_git(repo, "reset", "-q")
    (repo / "a.txt").write_text("the user's newer text\n")
    plain_git(repo, "reflog", "expire", "--expire=now", "--all")
    plain_git(repo, "gc", "-q", "--prune=now")
    assert not has_object(repo / ".git", staged)
    assert [c.path for c in ck.changes(before)] == ["a.txt"]
    with pytest.raises(ck.CheckpointError, match=r"a\.txt: its content at that checkpoint is gone"):
        ck.revert_file(before, "a.txt")
    with pytest.raises(ck.CheckpointError, match="gone"):
        ck.file_diff(before, None, "a.txt")
    assert (repo / "a.txt").read_text() == "the user's newer text\n"


def test_refs_of_an_earlier_tolaria_stay_readable_and_go_with_their_chat(repo: Path) -> None:
    (repo / "old.txt").write_text("from the old checkpoint\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_INDEX_FILE=str(repo.parent / "old-index"))
    subprocess.run(["git", "-C", str(repo), "add", "-A"], env=env, check=True)
    tree = subprocess.run(["git", "-C", str(repo), "write-tree"], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()
    old = plain_git(repo, "commit-tree", tree, "-m", "tolaria checkpoint").strip()
    legacy = "refs/tolaria/4-1000/1/before"
    plain_git(repo, "update-ref", legacy, old)
    (repo / "old.txt").unlink()

    loaded = ck.load(repo, legacy)
    assert loaded is not None and loaded.commit == old
    assert [c.path for c in ck.changes(loaded)] == ["old.txt"]
    ck.revert_file(ck.Checkpoint(repo, old, ""), "old.txt")  # from a stored (repo, commit)
    assert (repo / "old.txt").read_text() == "from the old checkpoint\n"
    assert ck.delete(repo, "refs/tolaria/4-1000/") == 1
    assert plain_git(repo, "for-each-ref", "refs/tolaria") == ""


def test_the_users_ignore_rules_hold_in_the_store(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store reads none of the user's config, yet what the user's git ignores stays out of
    a snapshot: their global ``core.excludesFile`` (read with ``git config``, through the one
    runner), the repository's own ``core.excludesFile``, ``.git/info/exclude``."""
    home = tmp_path / "userhome"
    home.mkdir()
    (home / "my-ignore").write_text("*.secret\n")
    (home / ".gitconfig").write_text("[core]\n\texcludesFile = ~/my-ignore\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("local-only/\n")
    for name in ("key.secret", "local-only/notes.txt", "kept.txt"):
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / name).write_text(f"{name}\n")
    cp = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    listed = plain_git(repo, "--git-dir", str(ck.store_of(repo)), "ls-tree", "-r",
                       "--name-only", cp.commit).split()
    assert sorted(listed) == ["a.txt", "kept.txt"]

    other = committed_repo(tmp_path / "other")  # the repository's own setting wins
    (tmp_path / "repo-ignore").write_text("*.log\n")
    plain_git(other, "config", "core.excludesFile", str(tmp_path / "repo-ignore"))
    (other / "run.log").write_text("log\n")
    (other / "key.secret").write_text("not ignored here\n")
    cp = ck.snapshot(other, ck.ref_name("1", "2", "before"))
    listed = plain_git(other, "--git-dir", str(ck.store_of(other)), "ls-tree", "-r",
                       "--name-only", cp.commit).split()
    assert sorted(listed) == ["a.txt", "key.secret"]


def test_git_starts_only_in_the_one_runner() -> None:
    """Every git Tolaria runs goes through tolaria/core/checkpoints/gitrun.py's ``run`` /
    ``run_listing`` (the safe config, a time limit, cancel): no other place names the git
    program or spawns ``git`` itself."""
    import ast

    package = Path(ck.__file__).resolve().parents[2]
    found = []
    for source in sorted(package.rglob("*.py")):
        tree = ast.parse(source.read_text(), str(source))
        where = {id(n): f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                 for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else \
                    func.attr if isinstance(func, ast.Attribute) else ""
                first = node.args[0] if node.args else None
                spawns_git = isinstance(first, ast.List) and bool(first.elts) and \
                    isinstance(first.elts[0], ast.Constant) and first.elts[0].value == "git"
                if name == "git_program" or spawns_git:
                    found.append((source.relative_to(package).as_posix(), where.get(id(node))))
    assert sorted(set(found)) == [("core/checkpoints/gitrun.py", "run"),
                                  ("core/checkpoints/gitrun.py", "run_listing")]
