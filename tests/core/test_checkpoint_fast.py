"""The fast snapshot (issue 21 item 4: a refreshed index copy kept between snapshots, one
``git status`` walk, trees written only along changed paths) gives the very tree the general
way (a fresh index copy, ``update-index``, ``write-tree``) gives, whatever the turn did; it is
really the one used; the kept copy follows the user's own ``git add``/``commit``; two processes
snapshotting the same work tree at once agree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hostile_git import clean_env, committed_repo, plain_git

from tolaria.core import checkpoints as ck
from tolaria.core.checkpoints import basetree, snap
from tolaria.core.checkpoints.store import ensure_store, layout, refresh_excludes

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def both_ways(repo: Path) -> tuple[str, str, ck.Skipped, ck.Skipped]:
    lay = layout(repo)
    ensure_store(lay)
    limits = ck.Limits()
    excludes = refresh_excludes(lay)
    fast, fast_skipped = snap._fast(lay, limits, None, excludes, time.monotonic())
    general, general_skipped = snap._write_tree(lay, limits, None, use_cache=False,
                                                excludes=excludes, started=time.monotonic())
    return fast, general, fast_skipped, general_skipped


def tree_listing(repo: Path, tree: str) -> str:
    return plain_git(repo, "--git-dir", str(ck.store_of(repo)), "ls-tree", "-r", "-t", tree)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = committed_repo(tmp_path / "proj")
    for name in ("src/deep/x/one.py", "src/deep/x/two.py", "src/other.py", "dir/file.txt",
                 "becomes_dir", "link_target.txt", "tool.sh", "gone/only.txt"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(f"{name}\n")
    os.symlink("link_target.txt", repo / "link")
    plain_git(repo, "add", "-A")
    sub = committed_repo(repo / "sub")  # a submodule (its gitlink in the parent's index)
    head = plain_git(sub, "rev-parse", "HEAD").strip()
    plain_git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},sub")
    plain_git(repo, "commit", "-qm", "tree")
    return repo


def test_the_fast_tree_is_the_general_tree_after_every_kind_of_change(repo: Path) -> None:
    fast, general, _s, _g = both_ways(repo)
    assert fast == general  # nothing changed yet: the base tree itself
    (repo / "src/deep/x/one.py").write_text("edited\n")  # a deep edit
    (repo / "src/other.py").unlink()  # a deletion
    (repo / "gone/only.txt").unlink()  # a folder emptied
    (repo / "becomes_dir").unlink()  # a file that became a folder
    (repo / "becomes_dir").mkdir()
    (repo / "becomes_dir/inside.txt").write_text("in\n")
    shutil.rmtree(repo / "dir")  # a folder that became a file
    (repo / "dir").write_text("now a file\n")
    (repo / "tool.sh").chmod(0o755)  # a mode change
    (repo / "link").unlink()
    os.symlink("elsewhere", repo / "link")  # a link retargeted
    os.symlink("a.txt", repo / "new_link")  # a new link
    (repo / "new/nested/deeper").mkdir(parents=True)  # a new folder tree
    (repo / "new/nested/deeper/n.txt").write_text("n\n")
    (repo / "src/deep/new.py").write_text("new\n")  # a new file in an existing folder
    (repo / "a b\tc.txt").write_text("odd name\n")
    (repo / "caf\u00e9.txt").write_text("accent\n")
    (repo / "sub" / "a.txt").write_text("bumped\n")  # the submodule moves to a new commit
    plain_git(repo / "sub", "commit", "-qam", "bump")
    (repo / "intent.txt").write_text("added with -N\n")  # an intent-to-add entry
    plain_git(repo, "add", "-N", "intent.txt")
    committed_repo(repo / "cloned")  # an untracked repository inside the tree
    (repo / "empty_repo").mkdir()  # ... and one with no commit yet
    plain_git(repo / "empty_repo", "init", "-q")
    (repo / "empty_repo" / "f.txt").write_text("f\n")
    fast, general, fast_skipped, general_skipped = both_ways(repo)
    assert tree_listing(repo, fast) == tree_listing(repo, general)
    assert fast == general
    assert fast_skipped == general_skipped
    listing = tree_listing(repo, fast)
    assert "160000 commit" in listing and "\tcloned\n" in listing and "\tintent.txt\n" in listing


def test_snapshots_reuse_one_refreshed_copy_until_the_user_changes_the_index(repo: Path) -> None:
    lay = layout(repo)
    first = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    base = basetree.base_of(lay)
    (repo / "a.txt").write_text("agent\n")
    ck.snapshot(repo, ck.ref_name("1", "1", "after"))
    assert basetree.base_of(lay) == base, "the same copy serves the next snapshot"
    plain_git(repo, "add", "a.txt")  # the user's own git writes their index
    plain_git(repo, "commit", "-qm", "user")
    second = ck.snapshot(repo, ck.ref_name("1", "2", "before"))
    assert basetree.base_of(lay) != base
    assert [(c.path, c.status) for c in ck.changes(first, second)] == [("a.txt", "modified")]
    fast, general, _s, _g = both_ways(repo)
    assert fast == general


def test_the_fast_way_is_the_one_a_snapshot_takes(repo: Path) -> None:
    """No ``write-tree`` over the whole index after the first snapshot: a git that would run it
    is not on the way (the base is made once, then only status and the edited trees)."""
    ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    lay = layout(repo)
    base = basetree.base_of(lay)
    (repo / "src/deep/x/two.py").write_text("changed\n")
    after = ck.snapshot(repo, ck.ref_name("1", "1", "after"))
    assert basetree.base_of(lay) == base
    fast, _general, _s, _g = both_ways(repo)
    assert plain_git(repo, "--git-dir", str(ck.store_of(repo)), "rev-parse",
                     f"{after.commit}^{{tree}}").strip() == fast


def test_a_conflicted_index_takes_the_general_way(repo: Path) -> None:
    plain_git(repo, "checkout", "-qb", "side")
    (repo / "a.txt").write_text("side\n")
    plain_git(repo, "commit", "-qam", "side")
    plain_git(repo, "checkout", "-q", "main")
    (repo / "a.txt").write_text("main\n")
    plain_git(repo, "commit", "-qam", "main")
    merge = subprocess.run(["git", "-C", str(repo), "merge", "side"], capture_output=True,
                           check=False, env=clean_env())
    assert merge.returncode != 0 and "CONFLICT" in merge.stdout.decode()
    lay = layout(repo)
    ensure_store(lay)
    with pytest.raises(basetree.NotFast):
        basetree.base_of(lay)
    cp = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    assert b"<<<<<<<" in ck.blob_bytes(repo, ck.tree_entries(cp, ["a.txt"])[0][2])


def test_two_processes_snapshotting_at_once_agree(repo: Path, tmp_path: Path) -> None:
    """The user commits, then two processes snapshot the same tree at the same moment (each may
    make the new base): both trees equal the general way's."""
    (repo / "a.txt").write_text("committed by the user\n")
    plain_git(repo, "commit", "-qam", "user")
    (repo / "src/other.py").write_text("agent\n")
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from tolaria.core import checkpoints as ck
        cp = ck.snapshot(Path({str(repo)!r}), ck.ref_name("9", sys.argv[1], "before"))
        print(ck.git(cp.repo, "version").returncode, flush=True)
        from tolaria.core.checkpoints.store import layout, store_git
        print(store_git(layout(cp.repo), "rev-parse", cp.commit + "^{{tree}}").stdout.decode())
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)], stdout=subprocess.PIPE,
                              text=True) for n in (1, 2)]
    outs = [p.communicate(timeout=60)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    _fast, general, _s, _g = both_ways(repo)
    assert [o[-1] for o in outs] == [general, general]
