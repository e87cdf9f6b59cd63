"""Bring the CLIs' own stored sessions into the store, so they show up as chats and resume.

Idempotent by the CLIs' own record ids: a session is known by its native id wherever it already is
in the store (imported earlier, or a chat Tolaria itself ran in that session), and each of its
turns by the id of the record holding its prompt (``Turn.record_id``). Each import notes, in its
``imported_session`` marker, what it stored of every turn (``records``: the stream id, a sketch of
the items, whether it was complete), so the next import adds exactly what the CLI wrote since:

- a turn not stored yet is added: ``completed`` if its last record is a completed answer, else
  ``interrupted`` (the CLI is still writing it, or it was cut off), however recent the file;
- a stored turn that grew (a tool got its result, more text, the answer came) is reopened and
  given what is new, then completed or left interrupted as the file now says;
- a turn Tolaria itself ran in the session (the CLI writes those to its file too) is matched by
  its prompt, in order, and not imported twice (also how sessions imported before record ids
  were kept are recognised).

Images sent with a prompt (Claude's image blocks, Codex's ``input_image``, Gemini's and Qwen's
``inlineData``, opencode's image ``file`` parts) become the imported turn's attachments: stored
content-addressed like an attached file, under the same caps (``[attachments]``), each said by
an ``attached`` event so the transcript shows its card; one over a cap (or unreadable) is an
``attached`` event with no stored copy whose note says why.

The CLIs' files are only read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tolaria.chats.attachments import AttachmentDesk
from tolaria.chats.importers import IMPORTERS
from tolaria.chats.importers.model import Session, SessionFormatError, Thinking, Tool, Turn
from tolaria.chats.titles import title_from_prompt
from tolaria.core.attachments.blobs import BlobStore
from tolaria.core.attachments.model import AttachError, AttachLimits, Attachment
from tolaria.core.events import (
    Attached,
    Done,
    Event,
    Init,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
)
from tolaria.core.store.db import Store
from tolaria.core.store.schema import STOP_NOT_ANSWERED
from tolaria.core.store.schema import Turn as StoredTurn
from tolaria.core.stream_id import new_stream_id

#: Marker on a chat made or extended by an import: ``{agent, session_id, source, turns,
#: completed, records}`` (``records``: record key -> ``{"stream_id", "items", "complete"}``).
IMPORT_MARKER = "imported_session"
NO_RESULT = "no result was recorded in the session"

#: What was stored of one item: ``["t", chars]`` text, ``["k", chars]`` thinking,
#: ``["u", tool id, has its result]`` a tool call.
Sketch = list[Any]


@dataclass(frozen=True)
class Imported:
    agent: str
    session_id: str
    conversation_id: int
    title: str
    #: New turns stored.
    turns_added: int
    #: Turns stored by an earlier import that got what the CLI wrote since.
    turns_updated: int = 0
    #: Of the turns added or updated, those left ``interrupted`` (not answered in the file).
    turns_unfinished: int = 0
    #: The stream ids of the updated turns (an open view shows them again).
    continued: tuple[str, ...] = ()


@dataclass
class ImportReport:
    imported: list[Imported] = field(default_factory=list)
    #: Sessions already in the store with everything the CLI wrote.
    unchanged: int = 0
    #: Files that are not sessions of their CLI's format: (path, why). Nothing of them is stored.
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    #: Unreadable lines inside otherwise good session files (left out).
    bad_lines: int = 0


@dataclass
class _Known:
    """What the store holds of one native session."""

    chat_id: int
    #: Record key -> what an import stored of that turn.
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The session's stored turns no import recorded (run by Tolaria, or imported before record
    #: ids were kept), oldest first: matched to the file's turns by prompt.
    unrecorded: list[StoredTurn] = field(default_factory=list)


def import_sessions(store: Store, home: Path, agents: Iterable[str] | None = None, *,
                    dry_run: bool = False, limits: AttachLimits | None = None,
                    blobs: BlobStore | None = None, host: str | None = None,
                    source: Callable[[Path], str] | None = None) -> ImportReport:
    """Import every session of ``agents`` (default: all) found under ``home``. ``limits``: the
    caps for the sessions' images (default: the settings' ``[attachments]``). ``host``: the
    files came from that host (tolaria/chats/importers/remote.py): new chats get it, so their
    next turns run there; ``source`` names a file as it is there."""
    chosen = list(agents) if agents is not None else list(IMPORTERS)
    unknown = [a for a in chosen if a not in IMPORTERS]
    if unknown:
        raise ValueError(f"no importer for {', '.join(unknown)} (known: {', '.join(IMPORTERS)})")
    report = ImportReport()
    known = _stored_sessions(store)
    desk = AttachmentDesk(store, blobs, limits if limits is not None else _limits())
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
                _import_one(store, session, known, report, dry_run, desk, host,
                            source(path) if source is not None else str(session.source))
    if not dry_run:
        store.flush()
    return report


def _stored_sessions(store: Store) -> dict[str, _Known]:
    """Native session id -> what the store holds of it."""
    found: dict[str, _Known] = {}
    for conversation in store.list_conversations():
        recorded: dict[str, dict[str, dict[str, Any]]] = {}
        for marker in store.markers(conversation.id, IMPORT_MARKER):
            data = marker.data if isinstance(marker.data, dict) else {}
            records = data.get("records")
            if isinstance(data.get("session_id"), str) and isinstance(records, dict):
                recorded.setdefault(data["session_id"], {}).update(records)
        for session_id, records in recorded.items():
            found.setdefault(session_id, _Known(conversation.id)).records.update(records)
        streams = {str(r.get("stream_id")) for rs in recorded.values() for r in rs.values()
                   if isinstance(r, dict)}
        for turn in store.turns(conversation.id):
            if turn.session_id and turn.stream_id not in streams:
                found.setdefault(turn.session_id, _Known(conversation.id)).unrecorded.append(turn)
    return found


def record_key(index: int, turn: Turn) -> str:
    """The turn's own record id; for a CLI record without one, its place and prompt."""
    if turn.record_id:
        return turn.record_id
    return f"#{index}:{hashlib.sha256(turn.prompt.encode('utf-8', 'replace')).hexdigest()[:16]}"


def _import_one(store: Store, session: Session, known: dict[str, _Known],
                report: ImportReport, dry_run: bool, desk: AttachmentDesk,
                host: str | None = None, source: str = "") -> None:
    have = known.get(session.session_id)
    added: list[tuple[str, Turn]] = []
    updated: list[tuple[str, Turn, dict[str, Any]]] = []
    unrecorded = list(have.unrecorded) if have is not None else []
    for index, turn in enumerate(session.turns):
        key = record_key(index, turn)
        stored = have.records.get(key) if have is not None else None
        if stored is not None:
            if _grew(stored, turn):
                updated.append((key, turn, stored))
            continue
        match = next((i for i, t in enumerate(unrecorded) if _same_prompt(t.prompt, turn.prompt)),
                     None)
        if match is not None:
            del unrecorded[:match + 1]  # Tolaria's own turn (or one imported by count before)
            continue
        added.append((key, turn))
    if not added and not updated:
        report.unchanged += 1
        return
    title = session.title or title_from_prompt(session.turns[0].prompt)
    unfinished = sum(1 for _, turn in added if not turn.complete) + sum(
        1 for _, turn, _ in updated if not turn.complete)
    chat_id = have.chat_id if have is not None else None
    if dry_run:
        report.imported.append(Imported(session.agent, session.session_id, chat_id or 0, title,
                                        len(added), len(updated), unfinished))
        return
    if chat_id is None:
        chat_id = store.create_conversation(title, session.agent, session.cwd, host=host).id
    records: dict[str, dict[str, Any]] = {}
    continued: list[str] = []
    for key, turn, stored in updated:
        stream_id = str(stored["stream_id"])
        if not store.reopen_turn(stream_id):
            continue  # the turn is gone (or running): nothing to complete
        continued.append(stream_id)
        _store_events(store, stream_id, _events(stream_id, turn.items, stored.get("items") or [],
                                                turn.complete), turn)
        records[key] = _record(stream_id, turn, stored.get("items") or [])
    for key, turn in added:
        stream_id = new_stream_id()
        attachments, said = _images(desk, chat_id, session.agent, stream_id, turn, host)
        store.start_turn(chat_id, stream_id, session.agent, turn.prompt, started_at=turn.started_at,
                         attachments=attachments)
        store.append_event(Init(stream_id, agent=session.agent, session_id=session.session_id))
        for event in said:
            store.append_event(event)
        _store_events(store, stream_id, _events(stream_id, turn.items, [], turn.complete), turn)
        records[key] = _record(stream_id, turn)
    store.add_marker(chat_id, IMPORT_MARKER, data={
        "agent": session.agent, "session_id": session.session_id,
        "source": source or str(session.source),
        "turns": len(added), "completed": len(updated), "records": records})
    entry = known.setdefault(session.session_id, _Known(chat_id))
    entry.records.update(records)
    entry.unrecorded = unrecorded
    report.imported.append(Imported(session.agent, session.session_id, chat_id, title,
                                    len(added), len(continued), unfinished, tuple(continued)))


def _limits() -> AttachLimits:
    from tolaria.config.settings import load_settings

    return load_settings()[0].attach_limits()


def _images(desk: AttachmentDesk, chat_id: int, agent: str, stream_id: str,
            turn: Turn, host: str | None = None) -> tuple[list[Attachment], list[Attached]]:
    """The turn's images stored (within the caps, the chat's earlier ones counted) and the
    ``attached`` events that show them; one that cannot be kept is said with why. A session
    from another host names its image files there: never read as a path of this machine."""
    stored: list[Attachment] = []
    said: list[Attached] = []
    how = f"in the {IMPORTERS[agent].label} session"
    for image in turn.images:
        try:
            if image.problem is not None:
                raise AttachError(f"{image.name}: {image.problem}")
            if image.data is not None:
                attachment = desk.attach_bytes(image.name, image.data, chat_id, stored)
            elif host is not None:
                raise AttachError(f"{image.name}: the file is on {host}, not on this computer")
            else:
                attachment = desk.attach(image.path or "", chat_id, stored)
        except AttachError as exc:
            size = len(image.data) if image.data is not None else 0
            said.append(Attached(stream_id, name=image.name, size=size, form="imported",
                                 how=how, note=f"not imported: {exc}"))
            continue
        stored.append(attachment)
        said.append(Attached(stream_id, name=image.name, size=attachment.size,
                             mime=attachment.mime, sha256=attachment.sha256, form="imported",
                             how=how))
    return stored, said


def _same_prompt(stored: str, written: str) -> bool:
    """A prompt Tolaria sent is the CLI's recorded prompt (which may carry context around it)."""
    mine = stored.strip()
    return bool(mine) and mine in written


def _store_events(store: Store, stream_id: str, events: Iterable[Event], turn: Turn) -> None:
    for event in events:
        store.append_event(event)
    if turn.complete:  # how long it took is the CLI's own (time stamps), not the import's
        store.append_event(Done(stream_id, stop_reason="end_turn", duration_ms=turn.duration_ms()))
    else:
        store.mark_interrupted(stream_id, STOP_NOT_ANSWERED)


def _record(stream_id: str, turn: Turn, before: list[Sketch] | None = None) -> dict[str, Any]:
    """What is stored of ``turn`` now: its items' sketches, never less than ``before`` said."""
    items = [_sketch(item) for item in turn.items]
    for index, old in enumerate((before or [])[:len(items)]):
        new = items[index]
        if old and new and old[0] == new[0] and old[0] in ("t", "k"):
            new[1] = max(int(old[1]), int(new[1]))
        elif old and new and old[0] == new[0] == "u" and old[1] == new[1]:
            new[2] = bool(old[2] or new[2])
    if before and len(before) > len(items):
        items += before[len(items):]
    return {"stream_id": stream_id, "items": items, "complete": turn.complete}


def _sketch(item: str | Tool | Thinking) -> Sketch:
    if isinstance(item, str):
        return ["t", len(item)]
    if isinstance(item, Thinking):
        return ["k", len(item.text)]
    return ["u", item.tool_id, item.output is not None]


def _grew(stored: dict[str, Any], turn: Turn) -> bool:
    """The file holds more of this turn than the store: new items, a longer text, a tool's
    result, or the answer's end (a file that holds less, rewritten, changes nothing)."""
    before = stored.get("items") or []
    return (turn.complete and not stored.get("complete")) or any(
        True for _ in _events("", turn.items, before, turn.complete))


def _events(stream_id: str, items: list[str | Tool | Thinking], before: list[Sketch],
            complete: bool) -> Iterable[Event]:
    """The events of ``items`` that are not in the store yet (``before`` sketches what is):
    the rest of a grown text, a tool's result, the new items. A tool still without a result
    stays open in an unfinished turn; a complete turn closes it as having none. A tool the user
    stopped gets no result: its card ends as its turn did (``interrupted``), as in a live turn."""
    wrote_text = any(s and s[0] == "t" for s in before)
    for index, item in enumerate(items):
        old = before[index] if index < len(before) else None
        if isinstance(item, str):
            if old is None:
                # Separate texts of one answer (before and after a tool call) as paragraphs.
                yield TextDelta(stream_id, text=("\n\n" if wrote_text else "") + item)
            elif old[0] == "t" and len(item) > int(old[1]):
                yield TextDelta(stream_id, text=item[int(old[1]):])
            wrote_text = True
        elif isinstance(item, Thinking):
            if old is None:
                yield ThinkingDelta(stream_id, text=item.text)
            elif old[0] == "k" and len(item.text) > int(old[1]):
                yield ThinkingDelta(stream_id, text=item.text[int(old[1]):])
        else:
            if old is None:
                yield ToolStart(stream_id, tool_id=item.tool_id, name=item.name, input=item.input)
            elif old[0] != "u" or old[2]:
                continue  # its result is stored already (or the file changed its shape)
            if item.output is not None:
                yield ToolDone(stream_id, tool_id=item.tool_id, output=item.output,
                               is_error=item.is_error)
            elif complete and not item.stopped:  # (a stopped one ends as its turn did)
                yield ToolDone(stream_id, tool_id=item.tool_id, output=NO_RESULT, is_error=True)
