"""Line-ending conversions (issue 21 item 2): under ``core.autocrlf``, ``eol=crlf`` or
``text=auto`` the user's index holds a file's LF blob while the disk holds CRLF bytes. A
snapshot must hold the bytes on disk, so Revert and Rewind write back exactly what was there
(and an untouched file is never listed as changed)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from hostile_git import plain_git

from tolaria.core import checkpoints as ck
from tolaria.core.checkpoints import snap
from tolaria.core.checkpoints.store import ensure_store, layout, refresh_excludes, store_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
CRLF = b"one\r\ntwo\r\n"

SETUPS = {
    "autocrlf-true": ("config", "core.autocrlf", "true"),
    "autocrlf-input": ("config", "core.autocrlf", "input"),
    "eol-crlf": ("attributes", "*.txt eol=crlf\n", ""),
    "text-auto": ("attributes", "* text=auto\n", ""),
}


def crlf_repo(root: Path, setup: str) -> Path:
    root.mkdir()
    plain_git(root, "init", "-q", "-b", "main")
    kind, first, second = SETUPS[setup]
    if kind == "config":
        plain_git(root, "config", first, second)
    else:
        (root / ".gitattributes").write_text(first)
    (root / "win.txt").write_bytes(CRLF)
    (root / "other.txt").write_bytes(b"other\n")
    for name in ("win.txt", "other.txt", ".gitattributes"):
        if (root / name).exists():  # older than the index: git trusts its stat cache for them
            os.utime(root / name, (time.time() - 60, time.time() - 60))
    plain_git(root, "add", "-A")
    plain_git(root, "commit", "-qm", "crlf")
    blob = plain_git(root, "cat-file", "-p", "HEAD:win.txt").encode()
    assert blob == b"one\ntwo\n", "the user's git normalized the file in its index"
    assert (root / "win.txt").read_bytes() == CRLF
    return root


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_revert_and_rewind_write_back_the_crlf_bytes_that_were_on_disk(
        tmp_path: Path, setup: str) -> None:
    repo = crlf_repo(tmp_path / "proj", setup)
    before = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    # The agent's turn: another file edited, the CRLF file changed, then left alone by a turn.
    (repo / "other.txt").write_bytes(b"agent\n")
    (repo / "win.txt").write_bytes(CRLF + b"three\r\n")
    after = ck.snapshot(repo, ck.ref_name("1", "1", "after"))
    assert sorted((c.path, c.status) for c in ck.changes(before, after)) == [
        ("other.txt", "modified"), ("win.txt", "modified")]
    ck.revert_file(before, "win.txt")
    assert (repo / "win.txt").read_bytes() == CRLF
    (repo / "win.txt").unlink()  # the user deletes it; a rewind brings back the exact bytes
    ck.rewind(before)
    assert (repo / "win.txt").read_bytes() == CRLF
    assert (repo / "other.txt").read_bytes() == b"other\n"


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_a_turn_that_leaves_a_crlf_file_alone_does_not_list_it(tmp_path: Path,
                                                             setup: str) -> None:
    repo = crlf_repo(tmp_path / "proj", setup)
    before = ck.snapshot(repo, ck.ref_name("1", "1", "before"))
    (repo / "other.txt").write_bytes(b"agent\n")
    after = ck.snapshot(repo, ck.ref_name("1", "1", "after"))
    assert [(c.path, c.status) for c in ck.changes(before, after)] == [("other.txt", "modified")]
    entry = ck.tree_entries(before, ["win.txt"])[0]
    assert ck.blob_bytes(repo, entry[2]) == CRLF


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_the_general_way_also_holds_the_bytes_on_disk(tmp_path: Path, setup: str) -> None:
    """The snapshot a conflicted or split index gets (snap._write_tree) converts alike."""
    repo = crlf_repo(tmp_path / "proj", setup)
    lay = layout(repo)
    ensure_store(lay)
    tree, _skipped = snap._write_tree(lay, ck.Limits(), None, use_cache=False,
                                      excludes=refresh_excludes(lay), started=time.monotonic())
    sha = store_git(lay, "rev-parse", f"{tree}:win.txt").stdout.decode().strip()
    assert ck.blob_bytes(repo, sha) == CRLF
