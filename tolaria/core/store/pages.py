"""Pages of a conversation's turns, and search over its stored text.

A chat can hold thousands of turns; a view must never read the whole event log to show the
newest one. ``TurnPages`` (mixed into ``Store``) reads a bounded run of turns plus the events of
those turns only, in two indexed queries (``turns_by_conversation``, the events primary key).
Search runs in SQLite over what is stored (``instr`` on the prompt and on the values a
text/tool/error row shows, never its JSON keys or ids), so finding a match never needs a widget
per turn; text that the store cut into several rows is
searched across the cuts with a bounded overlap (``_across_rows``).
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass, field
from typing import Any

from tolaria.core.events import Diagnostic, Event
from tolaria.core.store.schema import TURN_COLS, Turn, decode

#: Turns per page the views ask for when scrolling (several screens of ordinary turns).
PAGE_TURNS = 12
#: Turns of the first page of a chat that is opened: what fills a screen or two; the view asks
#: for more at once if they do not fill it.
FIRST_PAGE_TURNS = 6
#: Event kinds whose payload holds text a user may search for.
SEARCHABLE_KINDS = ("text_delta", "tool_start", "tool_update", "tool_done", "error")
#: Matches returned by one search, newest kept (a search bar shows "n of m").
SEARCH_LIMIT = 1000
#: Rows that are not shown in the text (between two text rows, the text runs on).
_NOT_IN_TEXT = ("init", "usage")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


_P = "CAST(e.payload AS TEXT)"


def _has(path: str) -> str:
    """SQL: the payload's JSON value at ``path`` holds the needle (parameter ``?2``, lowered)."""
    return f"instr(lower(json_extract({_P}, '{path}')), ?2) > 0"


#: SQL: a tool's input shows the needle in one of its values (its command, its file...).
_INPUT_VALUES = (f"EXISTS (SELECT 1 FROM json_tree({_P}, '$.input') WHERE type IN"
                 " ('text', 'integer', 'real') AND instr(lower(CAST(value AS TEXT)), ?2) > 0)")
#: SQL: the text of a ``text_delta`` row as its payload spells it: the payload's last value
#: (``{"stream_id": …, "kind": "text_delta", "text": "…"}``), without its closing ``"}``. JSON
#: escapes each character on its own, so the spelled needle (``?3``) is in the spelled text
#: exactly when the needle is in the text: no parsing, for the rows that are most of a chat.
_SPELLED_TEXT = (f"substr({_P}, instr({_P}, '\"text\": \"') + 9,"
                 f" length({_P}) - instr({_P}, '\"text\": \"') - 10)")
#: SQL: event row ``e`` shows the needle (``?2``), by what its kind shows. Other rows are first
#: tested the cheap way, the spelled needle anywhere in the raw payload (which a value holding
#: the needle always passes); only the rows that pass are parsed. An unreadable row never
#: matches (and never fails the search).
_SHOWN = (f"CASE WHEN e.kind = 'text_delta' THEN instr(lower({_SPELLED_TEXT}), ?3) > 0"
          f" WHEN instr(lower({_P}), ?3) = 0 THEN 0 WHEN NOT json_valid({_P}) THEN 0"
          f" WHEN e.kind = 'tool_done' THEN {_has('$.output')}"
          f" WHEN e.kind = 'error' THEN {_has('$.message')} OR {_has('$.hint')}"
          f" ELSE {_has('$.name')} OR {_has('$.output')} OR {_INPUT_VALUES} END")


def ascii_lower(text: str) -> str:
    """Lower case as SQLite's ``lower`` does it (ASCII letters only), so both sides agree."""
    return text.translate(_ASCII_LOWER)


def _spelled_length(head: str) -> int:
    """Characters of a JSON string's spelling before its closing quote (``len(head)`` when the
    quote is not in ``head``): a quote inside the text is always escaped."""
    escaped = False
    for index, char in enumerate(head):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            return index
    return len(head)


PAGE_LATEST = "latest"
PAGE_OLDER = "older"
PAGE_NEWER = "newer"
PAGE_AROUND = "around"


@dataclass(frozen=True)
class TurnPage:
    """A contiguous run of one conversation's turns (oldest first) with their events."""

    conversation_id: int
    kind: str
    turns: list[tuple[Turn, list[Event]]] = field(default_factory=list)
    #: Stored turns exist before the first / after the last turn of this page.
    has_older: bool = False
    has_newer: bool = False
    #: The turn a PAGE_AROUND page was asked for (the view scrolls to it).
    focus_turn_id: int | None = None


class TurnPages:
    """Mixed into ``Store``, which provides ``_query`` (locked, optionally flushing)."""

    def _query(self, sql: str, *args: object, flush: bool = False) -> list[Any]:
        raise NotImplementedError

    def turns_page(self, conversation_id: int, before_turn_id: int | None = None,
                   limit: int = PAGE_TURNS) -> TurnPage:
        """The ``limit`` turns before ``before_turn_id`` (or the newest ones), oldest first."""
        if before_turn_id is None:
            rows = self._query(f"SELECT {TURN_COLS} FROM turns WHERE conversation_id = ?"
                               " ORDER BY id DESC LIMIT ?", conversation_id, limit + 1, flush=True)
        else:
            rows = self._query(f"SELECT {TURN_COLS} FROM turns WHERE conversation_id = ?"
                               " AND id < ? ORDER BY id DESC LIMIT ?", conversation_id,
                               before_turn_id, limit + 1, flush=True)
        turns = [Turn(*row) for row in rows[:limit]][::-1]
        kind = PAGE_LATEST if before_turn_id is None else PAGE_OLDER
        return TurnPage(conversation_id, kind, self._with_events(turns),
                        has_older=len(rows) > limit,
                        has_newer=before_turn_id is not None and self._exists(
                            conversation_id, ">=", before_turn_id))

    def turns_after(self, conversation_id: int, after_turn_id: int,
                    limit: int = PAGE_TURNS) -> TurnPage:
        """The ``limit`` turns after ``after_turn_id``, oldest first."""
        rows = self._query(f"SELECT {TURN_COLS} FROM turns WHERE conversation_id = ? AND id > ?"
                           " ORDER BY id LIMIT ?", conversation_id, after_turn_id, limit + 1,
                           flush=True)
        turns = [Turn(*row) for row in rows[:limit]]
        return TurnPage(conversation_id, PAGE_NEWER, self._with_events(turns),
                        has_older=self._exists(conversation_id, "<=", after_turn_id),
                        has_newer=len(rows) > limit)

    def turns_around(self, conversation_id: int, turn_id: int,
                     limit: int = PAGE_TURNS) -> TurnPage:
        """A page holding ``turn_id`` near its middle (a search jumps there)."""
        before = self._query(f"SELECT {TURN_COLS} FROM turns WHERE conversation_id = ? AND id <= ?"
                             " ORDER BY id DESC LIMIT ?", conversation_id, turn_id,
                             limit // 2 + 2, flush=True)
        after = self._query(f"SELECT {TURN_COLS} FROM turns WHERE conversation_id = ? AND id > ?"
                            " ORDER BY id LIMIT ?", conversation_id, turn_id, limit // 2 + 1)
        head = [Turn(*row) for row in before[: limit // 2 + 1]][::-1]
        tail = [Turn(*row) for row in after[: limit // 2]]
        return TurnPage(conversation_id, PAGE_AROUND, self._with_events(head + tail),
                        has_older=len(before) > limit // 2 + 1,
                        has_newer=len(after) > limit // 2, focus_turn_id=turn_id)

    def search_turns(self, conversation_id: int, needle: str,
                     limit: int = SEARCH_LIMIT) -> list[int]:
        """Ids of the turns whose prompt or shown text contains ``needle`` (ASCII letters
        case-insensitively), oldest first; also text the store cut into several rows.

        Only what the transcript shows is searched: the answer text, a tool's name, the values
        of its input (its command, the file it edits), its output, an error's message and hint;
        never the payload's JSON keys, kinds or ids (``_SHOWN``). Each row is first tested the
        cheap way, the needle as JSON spells it anywhere in the raw payload (a value that holds
        the needle always passes); only the rows that pass are parsed."""
        if not needle.strip():
            return []
        lowered = ascii_lower(needle)
        # Payloads are JSON: look for the needle as JSON spells it (quotes, newlines escaped).
        spelled = json.dumps(lowered, ensure_ascii=False)[1:-1]
        kinds = ", ".join(f"?{5 + i}" for i in range(len(SEARCHABLE_KINDS)))
        rows = self._query(
            "SELECT id FROM turns WHERE conversation_id = ?1 AND (instr(lower(prompt), ?2) > 0"
            " OR EXISTS (SELECT 1 FROM events e WHERE e.turn_id = turns.id"
            f" AND e.kind IN ({kinds}) AND ({_SHOWN})))"
            " ORDER BY id DESC LIMIT ?4",
            conversation_id, lowered, spelled, limit, *SEARCHABLE_KINDS, flush=True)
        found = {row[0] for row in rows} | self._across_rows(conversation_id, spelled)
        return sorted(found)[-limit:]

    def _across_rows(self, conversation_id: int, spelled: str) -> set[int]:
        """Turns where ``spelled`` spans the cut between consecutive text rows (deltas are
        stored in rows cut at every flush and at COALESCE_MAX_CHARS).

        Only the first and last ``len(spelled) - 1`` characters of each row's text are read: a
        match across a cut has at most that many on either side, and a shorter row is read
        whole. It works on the text as the payload spells it (JSON escapes each character on
        its own, so the rows' spellings joined are the spelling of the joined text), which
        needs no JSON parsing: the text is the payload's last value (``{..., "text": "…"}``)."""
        reach = len(spelled) - 1
        if reach < 1:
            return set()
        p = "CAST(e.payload AS TEXT)"
        at = f"instr({p}, '\"text\": \"') + 9"  # where the spelled text starts
        # As bytes: a row holding half a UTF-16 pair (stored surrogatepass) must not stop the
        # search (SQLite hands such text over as is; Python's text decoding refuses it).
        text_only = "CASE WHEN e.kind = 'text_delta' THEN CAST({} AS BLOB) END"
        rows = self._query(
            "SELECT e.turn_id, e.kind,"
            f" {text_only.format(f'substr({p}, {at}, ? + 2)')},"  # a short text ends in '"}'
            f" {text_only.format(f'substr({p}, -? - 2, ?)')}"
            " FROM events e JOIN turns t ON t.id = e.turn_id WHERE t.conversation_id = ?"
            f" AND e.kind NOT IN ({', '.join('?' for _ in _NOT_IN_TEXT)})"
            " ORDER BY e.turn_id, e.seq", reach, reach, reach, conversation_id, *_NOT_IN_TEXT)
        found: set[int] = set()
        turn, before = None, ""  # the last ``reach`` characters of the text run so far
        for turn_id, kind, head, tail in rows:
            if kind != "text_delta" or head is None:  # a tool card...: the text run ends
                turn, before = None, ""
                continue
            head = bytes(head).decode("utf-8", "surrogatepass")
            tail = bytes(tail).decode("utf-8", "surrogatepass")
            if turn_id != turn:
                turn, before = turn_id, ""
            kept = min(reach, _spelled_length(head))  # a row shorter than ``reach``: all of it
            head = ascii_lower(head[:kept])
            tail = ascii_lower(tail[len(tail) - kept:])
            if before and spelled in before + head:
                found.add(turn_id)
            before = (before + head)[-reach:] if len(head) < reach else tail
        return found

    def turn_count(self, conversation_id: int) -> int:
        return int(self._query("SELECT count(*) FROM turns WHERE conversation_id = ?",
                               conversation_id)[0][0])

    def _exists(self, conversation_id: int, op: str, turn_id: int) -> bool:
        # ``op`` is one of our two literals, never caller text.
        assert op in ("<=", ">=")
        return bool(self._query(f"SELECT 1 FROM turns WHERE conversation_id = ? AND id {op} ?"
                                " LIMIT 1", conversation_id, turn_id))

    def _with_events(self, turns: list[Turn]) -> list[tuple[Turn, list[Event]]]:
        """Each turn with its events (one query for the page; undecodable rows say so)."""
        if not turns:
            return []
        by_id: dict[int, list[Event]] = {t.id: [] for t in turns}
        stream_of = {t.id: t.stream_id for t in turns}
        marks = ", ".join("?" for _ in turns)
        rows = self._query(f"SELECT turn_id, seq, payload FROM events WHERE turn_id IN ({marks})"
                           " ORDER BY turn_id, seq", *by_id)
        for turn_id, seq, payload in rows:
            try:
                by_id[turn_id].append(decode(payload))
            except ValueError as exc:
                by_id[turn_id].append(Diagnostic(stream_of[turn_id], source="store",
                                                 message=f"unreadable stored event #{seq}: {exc}"))
        return [(t, by_id[t.id]) for t in turns]
