"""What ``@`` offers in a folder: git's tracked and untracked-not-ignored files, else a bounded
walk; the per-folder cache and its invalidation."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tolaria.chats.mentions.cache import IndexCache
from tolaria.chats.mentions.listing import list_folder, walk
from tolaria.core.checkpoints.gitrun import Cancel, CheckpointCancelled


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


def make_repo(folder: Path) -> Path:
    folder.mkdir()
    git(folder, "init", "-q")
    (folder / ".gitignore").write_text("ignored.log\nout/\n")
    (folder / "src").mkdir()
    (folder / "src" / "tracked.py").write_text("x")
    (folder / "src" / "with space.md").write_text("x")
    git(folder, "add", ".")
    (folder / "untracked.txt").write_text("x")
    (folder / "ignored.log").write_text("x")
    (folder / "out").mkdir()
    (folder / "out" / "built.bin").write_text("x")
    return folder


def test_git_lists_tracked_and_untracked_but_not_ignored(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    listing = list_folder(str(repo))
    assert listing.source == "git"
    assert set(listing.files) == {".gitignore", "src/tracked.py", "src/with space.md",
                                  "untracked.txt"}
    assert listing.folders == ("src",)


def test_a_subfolder_of_a_repository_lists_relative_to_itself(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert set(list_folder(str(repo / "src")).files) == {"tracked.py", "with space.md"}


def test_the_walk_skips_heavy_folders_and_symlinked_ones(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "index.js").write_text("x")
    (root / ".venv").mkdir()
    (root / "app" / "deep").mkdir(parents=True)
    (root / "app" / "deep" / "main.rs").write_text("x")
    os.symlink(root / "app", root / "loop")
    listing = list_folder(str(root))
    assert listing.source == "walk" and not listing.truncated
    assert set(listing.files) == {"app/deep/main.rs", "loop"}
    assert set(listing.folders) == {"app", "app/deep"}


def test_the_walk_stops_at_its_limit(tmp_path: Path) -> None:
    root = tmp_path / "many"
    root.mkdir()
    for i in range(50):
        (root / f"f{i}").write_text("x")
    listing = walk(str(root), limit=10)
    assert listing.truncated and len(listing.files) == 10


def test_a_cancelled_walk_raises(tmp_path: Path) -> None:
    cancel = Cancel()
    cancel.set()
    with pytest.raises(CheckpointCancelled):
        walk(str(tmp_path), cancel)


def test_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        list_folder(str(tmp_path / "missing"))


def test_the_cache_goes_stale_when_git_or_the_folder_changes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    cache = IndexCache(max_age_s=3600)
    assert cache.get(str(repo)) is None
    first = cache.load(str(repo))
    assert cache.get(str(repo)) is first and cache.is_fresh(str(repo))
    time.sleep(0.01)
    (repo / "new.py").write_text("x")  # the folder's mtime changes
    assert not cache.is_fresh(str(repo))
    second = cache.load(str(repo))
    assert second.index.has("new.py")
    time.sleep(0.01)
    (repo / "src" / "deeper.py").write_text("x")
    git(repo, "add", "src/deeper.py")  # git's index changes
    assert not cache.is_fresh(str(repo))
    assert cache.load(str(repo)).index.has("src/deeper.py")


def test_the_cache_is_shared_between_threads(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    cache = IndexCache()
    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.load(str(repo))))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and cache.get(str(repo)) in results
