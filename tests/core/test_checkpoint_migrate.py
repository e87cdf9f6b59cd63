"""An earlier Tolaria's ``refs/tolaria/*`` in the user's repository (issue 21 item 3) are moved
into Tolaria's store on first use: a ``git push --mirror`` carries them before and none after,
the old turn's Revert still works once the user's ``git gc`` dropped what only they reached,
the move is idempotent, finishes an interrupted one, and two processes doing it at once agree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
from hostile_git import clean_env, committed_repo, plain_git

from tolaria.core import checkpoints as ck
from tolaria.core.checkpoints import migrate
from tolaria.core.checkpoints.store import ensure_store, layout, legacy_refs

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
SECRET = "API_KEY=sk-live-old-checkpoint\n"


def old_checkpoint(repo: Path, ref: str, index: Path) -> str:
    """A checkpoint as Tolaria wrote it before 2026-12: the work tree (untracked files too)
    through a copy of the index, a commit on HEAD, a ref in the user's repository."""
    env = clean_env() | {"GIT_INDEX_FILE": str(index)}
    shutil.copyfile(repo / ".git" / "index", index)
    subprocess.run(["git", "-C", str(repo), "add", "--all"], env=env, check=True)
    tree = subprocess.run(["git", "-C", str(repo), "write-tree"], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()
    commit = plain_git(repo, "commit-tree", tree, "-p", "HEAD", "-m",
                       f"tolaria checkpoint {ref}").strip()
    plain_git(repo, "update-ref", ref, commit)
    return commit


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = committed_repo(tmp_path / "proj")
    (repo / ".env").write_text(SECRET)  # untracked, not ignored: the old checkpoint holds it
    (repo / "notes.txt").write_text("the user's notes before the turn\n")
    old_checkpoint(repo, "refs/tolaria/4-1000/1/before", tmp_path / "i1")
    (repo / "notes.txt").write_text("the agent rewrote them\n")
    old_checkpoint(repo, "refs/tolaria/4-1000/1/after", tmp_path / "i2")
    return repo


def mirror_refs(repo: Path, target: Path) -> str:
    plain_git(target.parent, "init", "-q", "--bare", str(target))
    plain_git(repo, "push", "-q", "--mirror", str(target))
    return plain_git(target, "for-each-ref", "--format=%(refname)")


def test_a_mirror_push_carries_the_old_refs_before_the_move_and_none_after(
        repo: Path, tmp_path: Path) -> None:
    before_sha = plain_git(repo, "rev-parse", "refs/tolaria/4-1000/1/before").strip()
    secret = plain_git(repo, "hash-object", ".env").strip()
    assert "refs/tolaria/4-1000/1/before" in mirror_refs(repo, tmp_path / "mirror1.git")
    lay = layout(repo)
    ensure_store(lay)
    assert migrate.migrate(lay) == 2
    assert plain_git(repo, "for-each-ref", "refs/tolaria") == ""
    after = mirror_refs(repo, tmp_path / "mirror2.git")
    assert "refs/tolaria" not in after and "refs/heads/main" in after
    missing = subprocess.run(["git", "--git-dir", str(tmp_path / "mirror2.git"), "cat-file", "-e",
                              secret], capture_output=True, check=False)
    assert missing.returncode != 0, "the untracked .env left with the mirror"
    # The user's gc now drops what only the old refs reached; the store kept its own copy.
    plain_git(repo, "reflog", "expire", "--expire=now", "--all")
    plain_git(repo, "gc", "-q", "--prune=now")
    gone = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", before_sha],
                          capture_output=True, check=False, env=clean_env())
    assert gone.returncode != 0
    loaded = ck.load(repo, "refs/tolaria/4-1000/1/before")
    assert loaded is not None and loaded.commit == before_sha
    (repo / "notes.txt").write_text("the agent rewrote them\n")
    ck.revert_file(ck.Checkpoint(repo, before_sha, ""), "notes.txt")  # a stored turn record
    assert (repo / "notes.txt").read_text() == "the user's notes before the turn\n"
    assert migrate.migrate(lay) == 0, "idempotent"


def test_first_use_moves_them_and_an_interrupted_move_is_finished(repo: Path) -> None:
    lay = layout(repo)
    ensure_store(lay)
    old = dict((r, s) for r, s in legacy_refs(repo))
    # Interrupted after the copy, before any old ref was deleted:
    migrate._pack(lay, migrate._only_theirs(lay, sorted(set(old.values()))))
    assert len(legacy_refs(repo)) == 2
    ck.snapshot(repo, ck.ref_name("5", "1", "before"))  # first use of the repository
    assert legacy_refs(repo) == []
    stored = plain_git(repo, "--git-dir", str(lay.store), "for-each-ref",
                       "--format=%(refname) %(objectname)", "refs/tolaria/4-1000/")
    assert dict(line.split() for line in stored.splitlines()) == old


def test_two_processes_moving_at_once_lose_nothing(repo: Path, tmp_path: Path) -> None:
    for n in range(2, 12):
        (repo / "notes.txt").write_text(f"turn {n}\n")
        old_checkpoint(repo, f"refs/tolaria/4-1000/{n}/before", tmp_path / f"i{n}x")
    old = dict(legacy_refs(repo))
    script = textwrap.dedent(f"""
        from pathlib import Path
        from tolaria.core.checkpoints import migrate
        from tolaria.core.checkpoints.store import ensure_store, layout
        lay = layout(Path({str(repo)!r}))
        ensure_store(lay)
        print(migrate.migrate(lay))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=os.environ.copy())
             for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sum(int(out.strip()) for out, _err in outs) == len(old), "each ref moved once"
    assert legacy_refs(repo) == []
    stored = plain_git(repo, "--git-dir", str(layout(repo).store), "for-each-ref",
                       "--format=%(refname) %(objectname)", "refs/tolaria/")
    assert dict(line.split() for line in stored.splitlines()) == old
    plain_git(repo, "reflog", "expire", "--expire=now", "--all")
    plain_git(repo, "gc", "-q", "--prune=now")
    for n in range(2, 12):  # every old checkpoint readable from the store alone
        cp = ck.Checkpoint(repo, old[f"refs/tolaria/4-1000/{n}/before"], "")
        sha = ck.tree_entries(cp, ["notes.txt"])[0][2]
        assert ck.blob_bytes(repo, sha) == f"turn {n}\n".encode()


def test_a_stop_during_the_move_kills_it_and_the_next_use_finishes_it(
        tmp_path: Path) -> None:
    """The move runs before a turn's first snapshot, so a Stop reaches it like the snapshot's
    own git calls: its git is killed, the snapshot is cancelled, nothing is half-moved (the old
    refs are where they were), and the next snapshot moves them."""
    repo = committed_repo(tmp_path / "proj")
    (repo / "big.bin").write_bytes(os.urandom(64 * 1024 * 1024))  # packing it takes a while
    old_checkpoint(repo, "refs/tolaria/4-2000/1/before", tmp_path / "i1")
    (repo / "big.bin").unlink()
    refs = plain_git(repo, "for-each-ref", "refs/tolaria")
    cancel = ck.Cancel()

    def stop_once_packing() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for child in psutil.Process().children(recursive=True):
                try:
                    packing = "pack-objects" in " ".join(child.cmdline())
                except psutil.Error:  # a git that ended meanwhile
                    continue
                if packing:
                    cancel.set()
                    return
            time.sleep(0.005)

    stopper = threading.Thread(target=stop_once_packing)
    stopper.start()
    with pytest.raises(ck.CheckpointCancelled):
        ck.snapshot(repo, "refs/tolaria/4-2000/2/before", cancel=cancel)
    stopper.join()
    assert cancel.is_set, "the move never reached pack-objects"
    assert plain_git(repo, "for-each-ref", "refs/tolaria") == refs, "nothing half-moved"
    from tolaria.core.process import watchdog  # this process's, once any test ran an agent

    left = [c for c in psutil.Process().children(recursive=True) if c.pid != watchdog.watchdog_pid()]
    assert left == [], "the killed git is gone"
    taken = ck.snapshot(repo, "refs/tolaria/4-2000/2/before")
    assert plain_git(repo, "for-each-ref", "refs/tolaria") == ""
    assert ck.load(repo, "refs/tolaria/4-2000/1/before") is not None
    assert taken.commit
