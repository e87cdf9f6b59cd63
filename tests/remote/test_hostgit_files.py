"""hostgit's ``files`` operation (``@`` on a host, ADR 0035) where no sshd is needed: the
answer's size bound, a folder that is not there, and a host that never answers (the time limit:
no hang). Over real ssh: tests/remote/test_remote_mentions.py."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tolaria.chats.mentions.listing import HEAVY_FOLDERS, walk
from tolaria.core.remote import hostgit
from tolaria.core.remote.hostcall import HostError
from tolaria.core.remote.hostfiles import list_host_files
from tolaria.core.remote.hosts import Target


def plain(tmp_path: Path) -> Path:
    top = tmp_path / "plain"
    for name in ("a/one.txt", "b/two.txt", "node_modules/x/y.js", "three.txt"):
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text("x")
    return top


def test_the_answer_is_cut_at_its_byte_bound_and_says_so(tmp_path: Path) -> None:
    top = plain(tmp_path)
    whole = hostgit.op_files({"folder": str(top), "heavy": sorted(HEAVY_FOLDERS)})
    assert whole["source"] == "walk" and not whole["truncated"]
    cut = hostgit.op_files({"folder": str(top), "heavy": sorted(HEAVY_FOLDERS),
                            "most_bytes": 12})
    assert cut["truncated"] and len(cut["files"]) < len(whole["files"])
    # The host's walk is this machine's: the same entries, the same skip list.
    local = walk(str(top))
    assert local.files == ("three.txt", "a/one.txt", "b/two.txt")
    assert local.folders == ("a", "b")


def command_target(tmp_path: Path, *prefix: str) -> Target:
    return Target(prefix=prefix, python=sys.executable, cache_dir=str(tmp_path / "cache"),
                  name="box")


def test_a_folder_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(HostError) as said:
        list_host_files(command_target(tmp_path, "env"), str(tmp_path / "gone"),
                        heavy=HEAVY_FOLDERS, limit=100, seconds=1.0)
    assert str(said.value) == f"{tmp_path / 'gone'} is not a folder on this host"


def test_a_host_that_never_answers_is_given_up_on_its_time_limit(tmp_path: Path) -> None:
    hangs = command_target(tmp_path, sys.executable, "-c", "import time; time.sleep(60)")
    started = time.monotonic()
    with pytest.raises(HostError) as said:
        list_host_files(hangs, str(tmp_path), heavy=HEAVY_FOLDERS, limit=100, seconds=1.0,
                        timeout=1.0)
    assert time.monotonic() - started < 10
    assert str(said.value) == "the host did not answer within 1 s"
