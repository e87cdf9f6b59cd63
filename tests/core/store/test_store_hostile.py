"""The store against a hostile environment (issue 14): many processes opening a fresh or old
store at once, other local users, a full disk. Real processes, real SQLite files."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from nonroot import as_other_user, world_reachable_folder

from tolaria.core.store.db import SCHEMA_VERSION, Store
from tolaria.core.store.schema import MIGRATIONS
from tolaria.support import paths

ROOT = Path(__file__).resolve().parents[3]

#: Waits for the go file, then opens the store and writes a conversation: every child hits a
#: fresh database in the same millisecond or so.
_OPENER = """
import os, sys, time
from pathlib import Path
from tolaria.core.store.db import Store
db, go = Path(sys.argv[1]), sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.001)
store = Store(db)
store.create_conversation("t", "a", None)
store.close()
"""


def _env() -> dict[str, str]:
    pythonpath = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath)}


def _open_at_once(db: Path, count: int) -> None:
    """``count`` processes open ``db`` in the same instant; each must succeed."""
    go = db.parent.parent / f"go-{db.name}"
    procs = [subprocess.Popen([sys.executable, "-c", _OPENER, str(db), str(go)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
             for _ in range(count)]
    results = []
    try:
        time.sleep(1.0)  # let every child import and start polling for the go file
        go.touch()
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    failed = [r.stderr.strip().splitlines()[-1] for r in results if r.returncode != 0]
    assert not failed, failed


@pytest.mark.parametrize("round_", range(3))
def test_processes_opening_a_fresh_store_at_once_all_succeed(tmp_path: Path, round_: int) -> None:
    """Before: 10-14 of 40 ``tolaria run`` on a fresh home failed with "table conversations
    already exists" (each saw user_version 0 and migrated)."""
    db = tmp_path / "data" / "tolaria.sqlite3"
    _open_at_once(db, 6)
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM conversations").fetchone()[0] == 6
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_processes_migrating_an_old_store_at_once_all_succeed(tmp_path: Path) -> None:
    db = tmp_path / "data" / "tolaria.sqlite3"
    db.parent.mkdir()
    with closing(sqlite3.connect(db)) as conn:  # a version-1 store (no markers table yet)
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.commit()
    _open_at_once(db, 6)
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM markers").fetchone()[0] == 0


# --- other local users cannot read the data folder ------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _data_files(data: Path) -> list[Path]:
    return [data / "tolaria.sqlite3", data / "tolaria.sqlite3-wal", data / "tolaria.sqlite3-shm",
            data / "model-chats" / "s1.json", data / "crash-reports" / "crash-1-cli-1.txt"]


def test_data_is_private_and_an_old_install_is_tightened(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: data folder 0755 and tolaria.sqlite3 0644, so another local user read every
    prompt. Now the folder is 0700, the files 0600, and an existing install is tightened when
    a store opens; another (non-root) user can read none of it, even with the folder opened."""
    with world_reachable_folder() as home:
        monkeypatch.setenv("TOLARIA_HOME", str(home))
        data = paths.data_dir()
        old_umask = os.umask(0o022)
        try:  # an install made before: everything world-readable
            for sub in ("model-chats", "crash-reports"):
                (data / sub).mkdir(parents=True)
            for path in _data_files(data)[3:]:
                path.write_text("a prompt another user must not read")
            with closing(sqlite3.connect(data / "tolaria.sqlite3")) as conn:
                conn.execute("CREATE TABLE t (x)")
            os.chmod(data, 0o755)
            assert _mode(data / "tolaria.sqlite3") == 0o644
        finally:
            os.umask(old_umask)
        store = Store()  # the default store: tightens the data folder
        try:
            conversation = store.create_conversation("secret prompt", "a", None)
            store.start_turn(conversation.id, "ai-agent-stream-perm", "a", "secret prompt")
            assert _mode(data) == 0o700
            for sub in ("model-chats", "crash-reports"):
                assert _mode(data / sub) == 0o700
            for path in _data_files(data):
                assert _mode(path) == 0o600, path
            if os.getuid() != 0:
                return  # becoming another user needs root; the modes above are the proof
            for path in _data_files(data):
                denied = as_other_user(["cat", str(path)])
                assert denied.returncode != 0 and "Permission denied" in denied.stderr, path
            os.chmod(data, 0o755)  # the files refuse on their own too
            for sub in ("model-chats", "crash-reports"):
                os.chmod(data / sub, 0o755)
            for path in _data_files(data):
                denied = as_other_user(["cat", str(path)])
                assert denied.returncode != 0 and "Permission denied" in denied.stderr, path
        finally:
            store.close()


def test_a_fresh_store_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old_umask = os.umask(0)
    try:
        with closing(Store(tmp_path / "fresh" / "deep" / "tolaria.sqlite3")) as store:
            store.create_conversation("t", "a", None)
    finally:
        os.umask(old_umask)
    assert _mode(tmp_path / "fresh") == 0o700
    assert _mode(tmp_path / "fresh" / "deep") == 0o700
    for name in ("tolaria.sqlite3", "tolaria.sqlite3-wal", "tolaria.sqlite3-shm"):
        path = tmp_path / "fresh" / "deep" / name
        if path.exists():
            assert _mode(path) == 0o600, name
