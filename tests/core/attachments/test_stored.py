"""Stored copies (content-addressed, private), their rows in the store (schema 7 and later), the per-chat
cap, and deletion with the chat: real files, real SQLite."""

from __future__ import annotations

import sqlite3
import stat
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from attachfiles import png_bytes, write_png
from helpers import python_child

from tolaria.chats.attachments import AttachmentDesk, delete_chat
from tolaria.core.attachments.blobs import BlobStore
from tolaria.core.attachments.check import Checked
from tolaria.core.attachments.model import IMAGE, AttachError, AttachLimits
from tolaria.core.store.db import Store
from tolaria.core.store.schema import MIGRATIONS, SCHEMA_VERSION


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "data" / "tolaria.db")
    yield s
    s.close()


def test_a_copy_is_private_and_stored_once_per_content(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "att")
    data = png_bytes()
    first = blobs.put(Checked("a.png", data, "image/png", IMAGE))
    second = blobs.put(Checked("b.png", data, "image/png", IMAGE))
    assert first.sha256 == second.sha256 and (first.name, second.name) == ("a.png", "b.png")
    path = blobs.path(first.sha256)
    assert path.read_bytes() == data
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(blobs.root.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == [first.sha256]  # no temp left


def test_staged_copies_are_named_safely_and_go_with_the_run(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "att")
    one = blobs.put(Checked("my shot (1).png", png_bytes(), "image/png", IMAGE))
    two = blobs.put(Checked("notes", b"hi", "text/plain", "text"))
    staged = blobs.stage([one, two], "ai-agent-stream-x")
    assert [p.name for p in staged] == ["1-my_shot_1.png", "2-notes"]
    assert staged[0].read_bytes() == png_bytes()
    assert stat.S_IMODE(staged[0].parent.stat().st_mode) == 0o700
    blobs.unstage("ai-agent-stream-x")
    assert not staged[0].parent.exists() and blobs.has(one.sha256)


def test_a_failed_write_leaves_no_half_copy(tmp_path: Path) -> None:
    """A write that fails midway (here the file size limit, as a full disk would) is said in one
    line naming the file, and leaves nothing under a real name or as a temp file."""
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "from tolaria.core.attachments.blobs import BlobStore\n"
        "from tolaria.core.attachments.check import Checked\n"
        "from tolaria.core.attachments.model import AttachError\n"
        "try:\n"
        "    BlobStore(Path(sys.argv[1])).put(Checked('big.bin', b'x' * 100000,"
        " 'application/octet-stream', 'binary'))\n"
        "except AttachError as exc:\n"
        "    print(exc)\n")
    with python_child(script, str(tmp_path / "att")) as proc:
        out, err = proc.communicate(timeout=30)
    assert out.startswith("big.bin could not be stored: File too large"), (out, err)
    left = [p for p in (tmp_path / "att").rglob("*") if p.is_file()]
    assert left == []


def test_turn_rows_cap_per_chat_and_deletion_with_the_chat(tmp_path: Path, store: Store) -> None:
    blobs = BlobStore(tmp_path / "att")
    desk = AttachmentDesk(store, blobs, AttachLimits(max_file=10_000, max_chat=12_000))
    write_png(tmp_path / "a.png", noise=True, width=40, height=40)  # ~4.9 KB, incompressible
    (tmp_path / "b.txt").write_text("b" * 6000)
    chat = store.create_conversation("c", "demo", str(tmp_path))
    other = store.create_conversation("d", "demo", str(tmp_path))
    a = desk.attach(str(tmp_path / "a.png"), chat.id)
    b = desk.attach(str(tmp_path / "b.txt"), chat.id, [a])
    turn = store.start_turn(chat.id, "ai-agent-stream-t1", "demo", "look", attachments=[a, b])
    assert store.attachments(turn.id) == [a, b]
    assert store.chat_attachment_bytes(chat.id) == a.size + b.size
    # The same image again costs nothing more (counted once per content); a new file would
    # take the chat over its cap: refused, naming the file and the cap.
    assert desk.attach(str(tmp_path / "a.png"), chat.id) == a
    (tmp_path / "c.txt").write_text("c" * 2000)
    with pytest.raises(AttachError, match=r"c\.txt .* would take this chat over its 12 KB of attachments"):
        desk.attach(str(tmp_path / "c.txt"), chat.id)
    # The other chat shares the image: deleting the first keeps the image, drops the text.
    store.start_turn(other.id, "ai-agent-stream-t2", "demo", "same", attachments=[a])
    delete_chat(store, chat.id, blobs)
    assert blobs.has(a.sha256) and not blobs.has(b.sha256)
    delete_chat(store, other.id, blobs)
    assert not blobs.has(a.sha256)
    assert store.referenced_attachments() == set()


def test_an_attachment_deleted_before_send_is_sent_from_its_copy(tmp_path: Path) -> None:
    desk = AttachmentDesk(None, BlobStore(tmp_path / "att"))
    data = write_png(tmp_path / "shot.png")
    attached = desk.attach(str(tmp_path / "shot.png"))
    (tmp_path / "shot.png").unlink()
    assert desk.blobs.read(attached) == data and desk.missing([attached]) is None
    desk.blobs.path(attached.sha256).unlink()  # the copy itself gone (a chat deleted meanwhile)
    assert desk.missing([attached]) == "shot.png is no longer stored; attach it again"


def test_a_version_5_store_gains_the_attachments_table(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with closing(sqlite3.connect(db)) as conn:
        for version in range(5):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
        conn.execute("INSERT INTO conversations (title, agent, created_at, updated_at)"
                     " VALUES ('old', 'demo', 1, 1)")
        conn.execute("PRAGMA user_version = 5")
        conn.commit()
    with closing(Store(db)) as store:
        (conv,) = store.list_conversations()
        turn = store.start_turn(conv.id, "ai-agent-stream-old", "demo", "hi")
        assert store.attachments(turn.id) == []
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


if sys.platform == "win32":  # pragma: no cover
    pytest.skip("POSIX modes", allow_module_level=True)
