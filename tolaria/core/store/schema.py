"""The store's rows and schema: record types, migrations, and how an event becomes a payload.

Split out of tolaria/core/store/db.py (which re-exports every public name here); see docs/adr/0004.
Also how a connection is prepared (pragmas, migrations): ``prepare``.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tolaria.core.events import Event, event_from_dict

STATUS_RUNNING = "running"
STATUS_COMPLETED = "completed"
STATUS_CANCELLED = "cancelled"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"
#: The stop reason of an ``interrupted`` turn imported from a CLI's session with no answer in it
#: (stopped there, or still being written): tolaria/chats/importing.py.
STOP_NOT_ANSWERED = "not_answered"

ORIGIN_WINDOW = "window"
ORIGIN_COMMAND_LINE = "command-line"


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    agent: str
    cwd: str | None
    created_at: float
    updated_at: float
    #: Last session id the agent reported (for resume).
    agent_session_id: str | None
    #: Where the chat was started: ``ORIGIN_WINDOW`` or ``ORIGIN_COMMAND_LINE`` (``tolaria run``,
    #: shown with a badge in the sidebar).
    origin: str = "window"
    #: The chat's own limits (tolaria/core/limits.py ``RunLimits.to_dict`` as JSON), over the
    #: Preferences' ``[limits]``; None: the defaults.
    limits: str | None = None
    #: Where the chat's turns run: None for this machine, else a destination as
    #: ``tolaria run --host`` takes it (an ssh host, ``exec:PREFIX``, a ``[hosts."NAME"]``).
    host: str | None = None
    #: On a host: "keep running when disconnected" (ADR 0032): a lost connection does not end
    #: the run there; Tolaria reattaches on reconnect or restart.
    keep_running: bool = False


@dataclass(frozen=True)
class Turn:
    id: int
    conversation_id: int
    stream_id: str
    agent: str
    prompt: str
    status: str  # running | completed | cancelled | failed | interrupted
    stop_reason: str | None
    started_at: float
    finished_at: float | None
    duration_ms: int | None
    session_id: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None


CONV_COLS = ", ".join(f.name for f in dataclasses.fields(Conversation))
TURN_COLS = ", ".join(f.name for f in dataclasses.fields(Turn))

# Migration i brings the schema from version i to i + 1 (PRAGMA user_version). Append, never edit.
# events.payload is JSON text, or UTF-8 bytes (surrogatepass) when it holds lone surrogates: an
# agent may split a UTF-16 pair across two deltas, and the transcript must come back exact.
MIGRATIONS: list[tuple[str, ...]] = [
    (
        """CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL,
            agent TEXT NOT NULL, cwd TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
            agent_session_id TEXT)""",
        "CREATE INDEX conversations_by_update ON conversations (updated_at, id)",
        """CREATE TABLE turns (id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            stream_id TEXT NOT NULL UNIQUE, agent TEXT NOT NULL, prompt TEXT NOT NULL,
            status TEXT NOT NULL, stop_reason TEXT, started_at REAL NOT NULL, finished_at REAL,
            duration_ms INTEGER, session_id TEXT, input_tokens INTEGER, output_tokens INTEGER,
            cost_usd REAL)""",
        "CREATE INDEX turns_by_conversation ON turns (conversation_id, id)",
        "CREATE INDEX turns_running ON turns (status) WHERE status = 'running'",
        """CREATE TABLE events (
            turn_id INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL, kind TEXT NOT NULL, payload NOT NULL, created_at REAL NOT NULL,
            PRIMARY KEY (turn_id, seq))""",
    ),
    (
        # Operator actions (queue, deliver, restart, stop) with their time: the audit record.
        """CREATE TABLE markers (id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            turn_id INTEGER REFERENCES turns (id) ON DELETE CASCADE,
            kind TEXT NOT NULL, data TEXT NOT NULL, created_at REAL NOT NULL)""",
        "CREATE INDEX markers_by_conversation ON markers (conversation_id, id)",
    ),
    (
        # Where a chat was started (the window, or ``tolaria run``); older chats: the window.
        "ALTER TABLE conversations ADD COLUMN origin TEXT NOT NULL DEFAULT 'window'",
    ),
    (
        # Messages queued behind a running turn (tolaria/core/store/queue.py): they survive a
        # quit or a crash; a queue may be paused (with why: user, quit, crash).
        """CREATE TABLE queued_messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            position INTEGER NOT NULL, text TEXT NOT NULL, created REAL NOT NULL)""",
        "CREATE INDEX queued_by_conversation ON queued_messages (conversation_id, position)",
        """CREATE TABLE queue_state (
            conversation_id INTEGER PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
            paused INTEGER NOT NULL DEFAULT 0, reason TEXT)""",
    ),
    (
        # A chat's own limits that stop its runs (issue 27): JSON, NULL for the defaults.
        "ALTER TABLE conversations ADD COLUMN limits TEXT",
    ),
    (
        # Usage beyond tokens and cost (issue 27, tolaria/core/store/usage.py): cache tokens,
        # the context used of the model's window, the plan's rate limits (JSON); and the turns
        # by start time, for the totals of a period.
        "ALTER TABLE turns ADD COLUMN cache_read_tokens INTEGER",
        "ALTER TABLE turns ADD COLUMN cache_write_tokens INTEGER",
        "ALTER TABLE turns ADD COLUMN context_tokens INTEGER",
        "ALTER TABLE turns ADD COLUMN context_window INTEGER",
        "ALTER TABLE turns ADD COLUMN rate_limits TEXT",
        "CREATE INDEX turns_by_start ON turns (started_at)",
        "CREATE INDEX turns_rate_limits ON turns (agent, id) WHERE rate_limits IS NOT NULL",
    ),
    (
        # Files attached to a turn (tolaria/core/store/attachments.py, ADR 0028): the stored
        # copy is named by its SHA-256 in the data folder; the rows go with the turn.
        """CREATE TABLE attachments (
            turn_id INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
            position INTEGER NOT NULL, name TEXT NOT NULL, sha256 TEXT NOT NULL,
            size INTEGER NOT NULL, mime TEXT NOT NULL, kind TEXT NOT NULL,
            PRIMARY KEY (turn_id, position))""",
        "CREATE INDEX attachments_by_sha ON attachments (sha256)",
    ),
    (
        # Where a chat's turns run (issue 25): NULL on this machine, else the host as given.
        "ALTER TABLE conversations ADD COLUMN host TEXT",
    ),
    (
        # Files queued with a message typed while a turn ran (issue 26; tolaria/core/store/
        # queue.py): the stored copies by SHA-256, in order; they go with the message.
        """CREATE TABLE IF NOT EXISTS queued_attachments (
            message_id INTEGER NOT NULL REFERENCES queued_messages (id) ON DELETE CASCADE,
            position INTEGER NOT NULL, name TEXT NOT NULL, sha256 TEXT NOT NULL,
            size INTEGER NOT NULL, mime TEXT NOT NULL, kind TEXT NOT NULL,
            PRIMARY KEY (message_id, position))""",
    ),
    (
        # A chat's "keep running when disconnected" on its host (ADR 0032): 0 or 1.
        "ALTER TABLE conversations ADD COLUMN keep_running INTEGER NOT NULL DEFAULT 0",
    ),
]
SCHEMA_VERSION = len(MIGRATIONS)


def encode(data: dict[str, Any]) -> str | bytes:
    """An event dict as its stored payload: JSON text, or surrogatepass UTF-8 bytes."""
    text = json.dumps(data, ensure_ascii=False, default=str)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def decode(payload: str | bytes) -> Event:
    if isinstance(payload, bytes):
        payload = payload.decode("utf-8", "surrogatepass")
    return event_from_dict(json.loads(payload))


#: How long a write waits for another process's write transaction (a migration, a flush).
BUSY_TIMEOUT_MS = 10_000


def prepare(conn: sqlite3.Connection, path: Path) -> None:
    """Pragmas, then the schema brought to ``SCHEMA_VERSION`` (``conn`` in autocommit mode).

    The version is read and the migrations run in one write transaction, so of several
    processes opening the same fresh (or old) store at once exactly one migrates and the others
    see its result (before: "table conversations already exists"). RuntimeError for a store
    made by a newer Tolaria.
    """
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    _set_wal(conn)
    conn.executescript("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"{path} has schema version {version}; this Tolaria knows {SCHEMA_VERSION}"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[target - 1]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _set_wal(conn: sqlite3.Connection) -> None:
    """WAL mode. Switching a fresh database needs it to itself for a moment, and SQLite may
    answer "locked" then without calling the busy handler: several processes opening a fresh
    home at once retry here."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
