"""Bring the CLIs' own stored sessions into the store, so they show up as chats and resume.

Idempotent: a session is known by its native id wherever it already is in the store (imported
earlier, or a chat Tolaria itself ran in that session), and only turns beyond those stored are
added; re-importing an unchanged session adds nothing. A chat that continued an imported session
in Tolaria resumes it natively, and the CLI records those turns in its own file too: they count
as stored, so they are not imported twice. The CLIs' files are only read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tolaria.chats.importers import IMPORTERS
from tolaria.chats.importers.model import Session, SessionFormatError, Thinking, Tool
from tolaria.chats.titles import title_from_prompt
from tolaria.core.events import Done, Event, Init, TextDelta, ThinkingDelta, ToolDone, ToolStart
from tolaria.core.store.db import Store
from tolaria.core.stream_id import new_stream_id

#: Marker on a chat made or extended by an import: ``{agent, session_id, source, turns}``.
IMPORT_MARKER = "imported_session"
NO_RESULT = "no result was recorded in the session"


@dataclass(frozen=True)
class Imported:
    agent: str
    session_id: str
    conversation_id: int
    title: str
    turns_added: int


@dataclass
class ImportReport:
    imported: list[Imported] = field(default_factory=list)
    #: Sessions already in the store with every turn.
    unchanged: int = 0
    #: Files that are not sessions of their CLI's format: (path, why). Nothing of them is stored.
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    #: Unreadable lines inside otherwise good session files (left out).
    bad_lines: int = 0


def import_sessions(store: Store, home: Path, agents: Iterable[str] | None = None, *,
                    dry_run: bool = False) -> ImportReport:
    """Import every session of ``agents`` (default: all) found under ``home``."""
    chosen = list(agents) if agents is not None else list(IMPORTERS)
    unknown = [a for a in chosen if a not in IMPORTERS]
    if unknown:
        raise ValueError(f"no importer for {', '.join(unknown)} (known: {', '.join(IMPORTERS)})")
    report = ImportReport()
    known = _stored_sessions(store)
    for agent in chosen:
        importer = IMPORTERS[agent]
        for path in importer.find(home):
            try:
                sessions = importer.read(path)
            except (SessionFormatError, OSError) as exc:
                report.skipped.append((path, str(exc) or type(exc).__name__))
                continue
            for session in sessions:
                report.bad_lines += session.bad_lines
                _import_one(store, session, known, report, dry_run)
    if not dry_run:
        store.flush()
    return report


def _stored_sessions(store: Store) -> dict[str, tuple[int, int]]:
    """Native session id -> (the chat holding it, how many of its turns ran in that session)."""
    found: dict[str, tuple[int, int]] = {}
    for conversation in store.list_conversations():
        for turn in store.turns(conversation.id):
            if turn.session_id:
                chat, count = found.get(turn.session_id, (conversation.id, 0))
                found[turn.session_id] = (chat, count + 1)
    return found


def _import_one(store: Store, session: Session, known: dict[str, tuple[int, int]],
                report: ImportReport, dry_run: bool) -> None:
    chat_id, stored = known.get(session.session_id, (None, 0))
    new_turns = session.turns[stored:]
    if not new_turns:
        report.unchanged += 1
        return
    title = session.title or title_from_prompt(session.turns[0].prompt)
    if dry_run:
        report.imported.append(Imported(session.agent, session.session_id, chat_id or 0, title,
                                        len(new_turns)))
        return
    if chat_id is None:
        chat_id = store.create_conversation(title, session.agent, session.cwd).id
    for turn in new_turns:
        stream_id = new_stream_id()
        store.start_turn(chat_id, stream_id, session.agent, turn.prompt)
        for event in _events(stream_id, session, turn.items):
            store.append_event(event)
    store.add_marker(chat_id, IMPORT_MARKER, data={
        "agent": session.agent, "session_id": session.session_id, "source": str(session.source),
        "turns": len(new_turns)})
    known[session.session_id] = (chat_id, stored + len(new_turns))
    report.imported.append(Imported(session.agent, session.session_id, chat_id, title,
                                    len(new_turns)))


def _events(stream_id: str, session: Session, items: Iterable[str | Tool | Thinking]
            ) -> Iterable[Event]:
    yield Init(stream_id, agent=session.agent, session_id=session.session_id)
    wrote_text = False
    for item in items:
        if isinstance(item, str):
            # Separate texts of one answer (before and after a tool call) as paragraphs.
            yield TextDelta(stream_id, text=("\n\n" if wrote_text else "") + item)
            wrote_text = True
        elif isinstance(item, Thinking):
            yield ThinkingDelta(stream_id, text=item.text)
        else:
            yield ToolStart(stream_id, tool_id=item.tool_id, name=item.name, input=item.input)
            if item.output is None:
                yield ToolDone(stream_id, tool_id=item.tool_id, output=NO_RESULT, is_error=True)
            else:
                yield ToolDone(stream_id, tool_id=item.tool_id, output=item.output,
                               is_error=item.is_error)
    yield Done(stream_id, stop_reason="end_turn")
