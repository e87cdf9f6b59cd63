"""Matching what follows ``@`` against a folder's paths, fast enough for every keystroke on a
100,000-file repository (bench/mention_picker.py; the window's budget is 50 ms).

A path matches when it holds the query's letters in order (case-insensitive). The ranks, best
first: 0 the name is the query, 1 the name starts with it, 2 the name contains it, 3 the path
contains it, 4 the name holds its letters in order, 5 the path does; within a rank shorter
paths come first, then alphabetical. Every query is ranked completely: the results are those of
ranking every path (tests/chats/mentions/test_matcher.py holds that reference).

Scoring 100,000 paths in Python per keystroke is too slow, so Python sees few of them:

- the paths are kept in the order that breaks ties within a rank (shorter, then alphabetical),
  so the best of a rank are the first found in that order, and a search stops as soon as it has
  the rows the picker shows;
- ranks 0 to 3 are substrings: ``str.find`` over all names (or paths) joined into one text, in
  that order, from the first rank to the last, stopping when the rows are full;
- ranks 4 and 5 (only when 0 to 3 did not fill the rows): the candidates are the paths holding
  every letter of the query (one byte per path and letter, ANDed as integers: a few
  microseconds), narrowed by the last query's matches when the query extends it (typing only
  narrows); the letters-in-order test runs in the regular expression engine over the candidates
  (``map`` and ``compress``: no Python loop per path), in order, a chunk at a time, until the
  rows are full. A scan that went through is the query's complete matches, kept for the next
  keystroke.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, compress, repeat
from operator import contains, eq, gt, not_

#: Rows the picker shows.
DEFAULT_LIMIT = 50
#: A letter held by fewer than 1/16 of the paths keeps a list of them; its bytes are made when
#: a query asks (bounded memory for folders with many distinct letters).
_RARE = 16
#: Rare letters whose bytes are kept made.
_KEEP_MADE = 64
#: Candidates tested at once (the first chunk small: a dense query stops early).
_FIRST_CHUNK = 1_024
_CHUNK = 8_192
_SPLIT = 256 * 1024
_SLICE = 16_384
#: Up to this many paths (or names) holding a query's letters, those are tested one by one (in
#: C); more, and the joined text is searched, stopping when the rows are full.
_FEW = 20_000
_SET = re.compile(b"\x01")


@dataclass(frozen=True)
class Match:
    #: Relative, ``/``-separated; a folder ends with ``/``.
    path: str
    rank: int

    @property
    def is_folder(self) -> bool:
        return self.path.endswith("/")

    @property
    def name(self) -> str:
        """The last part (a folder's with its ``/``)."""
        stem = self.path.rstrip("/")
        return stem[stem.rfind("/") + 1:] + ("/" if self.is_folder else "")

    @property
    def parent(self) -> str:
        stem = self.path.rstrip("/")
        cut = stem.rfind("/")
        return stem[:cut] if cut >= 0 else ""


class _Letters:
    """Per letter, which of ``strings`` hold it: one byte per string (0 or 1) as an integer, so
    the paths holding every letter of a query are one ``&`` per letter."""

    def __init__(self, strings: Sequence[str], text: str) -> None:
        self.size = len(strings)
        self._dense: dict[str, int] = {}
        self._rare: dict[str, array[int]] = {}
        self._made: dict[str, int] = {}
        letters: set[str] = set()
        for at in range(0, len(text), _SPLIT):  # short C calls: the window keeps the GIL
            letters.update(text[at:at + _SPLIT])
        letters.discard("\n")
        starts = _starts(strings)
        for letter in letters:
            if text.count(letter) * _RARE >= self.size:
                # In slices: each one C call, short enough not to hold the window's GIL long.
                self._dense[letter] = int.from_bytes(b"".join(
                    bytes(map(contains, strings[at:at + _SLICE], repeat(letter)))
                    for at in range(0, self.size, _SLICE)), "little")
                continue
            lines = array("i")
            for found in re.finditer(re.escape(letter), text):
                line = bisect_right(starts, found.start()) - 1
                if not lines or lines[-1] != line:
                    lines.append(line)
            self._rare[letter] = lines

    def having(self, letters: str) -> int | None:
        """The strings holding every one of ``letters`` (None: some letter is in none)."""
        flags = -1
        for letter in set(letters):
            one = self._dense.get(letter)
            if one is None:
                one = self._made.get(letter)
            if one is None:
                lines = self._rare.get(letter)
                if lines is None:
                    return None
                made = bytearray(self.size)
                for line in lines:
                    made[line] = 1
                one = int.from_bytes(made, "little")
                if len(self._made) >= _KEEP_MADE:
                    self._made.clear()
                self._made[letter] = one
            flags &= one
        return flags


class MentionIndex:
    """The paths of one folder, ready to be matched. Built once; ``search`` keeps only the last
    query's matches (use one index per picker, or accept that two pickers share that memo)."""

    def __init__(self, files: Sequence[str], folders: Sequence[str] = ()) -> None:
        given = [f"{d}/" for d in folders] + [f for f in files if "\n" not in f]
        # Shorter first, then alphabetical: the order within a rank. By length first, then one
        # short sort per length: one long sort is a single C call that would hold the GIL (and
        # so the window) for a while on the worker thread.
        by_length: dict[int, list[str]] = {}
        for entry in given:
            by_length.setdefault(len(entry), []).append(entry)
        entries: list[str] = []
        for length in sorted(by_length):
            entries += sorted(by_length[length], key=str.lower)
        self._entries = entries
        self._lower = lower = [e.lower() for e in entries]
        self._names = names = [low[low.rstrip("/").rfind("/") + 1:].rstrip("/") for low in lower]
        self._text = _joined(lower)
        self._starts = _starts(lower)
        self._names_text = _joined(names)
        self._name_starts = _starts(names)
        self._has = _Letters(lower, self._text)
        self._name_has = _Letters(names, self._names_text)
        # No query: the top level first (folders, then files), then by depth.
        by_depth: dict[int, list[int]] = {}
        for i, low in enumerate(lower):
            by_depth.setdefault(low.rstrip("/").count("/"), []).append(i)
        top: list[int] = []
        for depth in sorted(by_depth):
            level = by_depth[depth]
            if len(level) > 4 * DEFAULT_LIMIT * 4:
                level = level[: 4 * DEFAULT_LIMIT * 4]
            top += sorted(level, key=lambda i: (not entries[i].endswith("/"), lower[i]))
            if len(top) >= DEFAULT_LIMIT * 4:
                break
        self._top = top[: DEFAULT_LIMIT * 4]
        #: The last in-order scan: (query, every path below this index was tested, its matches).
        self._memo: tuple[str, int, list[int]] | None = None
        known: set[str] = set()
        for at in range(0, len(entries), _SLICE):
            known.update(entries[at:at + _SLICE])
        self._known = known

    def has(self, path: str) -> bool:
        """Whether ``path`` (a folder with its ``/``, or without) is offered."""
        return path in self._known or f"{path.rstrip('/')}/" in self._known

    def __len__(self) -> int:
        return len(self._entries)

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Match]:
        q = query.lower().replace("\\", "/").strip().replace("\n", "")
        if not q:
            return [Match(self._entries[i], 6) for i in self._top[:limit]]
        found: list[tuple[int, int]] = []
        if limit > 0:
            self._substrings(q, limit, found)
        # One letter "in order" is the letter: ranks 4 and 5 hold nothing more.
        if len(found) < limit and len(q) > 1:
            self._in_order(q, limit, found)
        return [Match(self._entries[i], rank) for i, rank in found]

    # -- ranks 0 to 3: the query itself ----------------------------------------------------------
    def _substrings(self, q: str, limit: int, found: list[tuple[int, int]]) -> None:
        lower, names = self._lower, self._names
        slashed = "/" in q
        flags = None if slashed else self._name_has.having(q)  # a name holds no "/"
        if flags is not None and flags.bit_count() <= _FEW:
            # Few names hold its letters: test those (in C), then rank the ones that hold it.
            ids = _ids(flags, 0, len(names))
            hits = list(compress(ids, map(contains, map(names.__getitem__, ids), repeat(q))))
            held = list(map(names.__getitem__, hits))
            equal = list(map(eq, held, repeat(q)))
            starts = list(map(str.startswith, held, repeat(q)))
            groups = (compress(hits, equal), compress(hits, map(gt, starts, equal)),
                      compress(hits, map(not_, starts)))
            for rank, group in enumerate(groups):
                for i in group:
                    if lower[i] != q:
                        found.append((i, rank))
                        if len(found) >= limit:
                            return
        elif flags is not None:  # many: the first in order holding it, rank by rank
            passes: tuple[tuple[int, str, Callable[[int], bool]], ...] = (
                (0, f"\n{q}\n", lambda i: True),
                (1, f"\n{q}", lambda i: names[i] != q),
                (2, q, lambda i: not names[i].startswith(q)))
            for rank, needle, keep in passes:
                for i in _lines(self._names_text, self._name_starts, needle):
                    if keep(i) and lower[i] != q:
                        found.append((i, rank))
                        if len(found) >= limit:
                            return
        flags = self._has.having(q)
        if flags is None:
            return
        if flags.bit_count() <= _FEW:
            ids = _ids(flags, 0, len(lower))
            lines: Iterator[int] | list[int] = list(
                compress(ids, map(contains, map(lower.__getitem__, ids), repeat(q))))
        else:
            lines = _lines(self._text, self._starts, q)
        for i in lines:
            if (slashed or q not in names[i]) and lower[i] != q:
                found.append((i, 3))
                if len(found) >= limit:
                    return

    # -- ranks 4 and 5: the letters in order -----------------------------------------------------
    def _in_order(self, q: str, limit: int, found: list[tuple[int, int]]) -> None:
        lower, names = self._lower, self._names
        path_order = _in_order(q)
        name_order = None if "/" in q else _in_order(q).match
        if name_order is not None:
            flags = self._name_has.having(q)
            if flags is not None:
                for chunk in _chunks(_ids(flags, 0, len(names))):
                    for i in compress(chunk, map(name_order, map(names.__getitem__, chunk))):
                        if q not in lower[i]:
                            found.append((i, 4))
                            if len(found) >= limit:
                                return
        flags = self._has.having(q)
        if flags is None:
            self._memo = (q, len(lower), [])
            return
        memo = self._memo
        size = len(lower)
        if memo is not None and q.startswith(memo[0]):
            known = memo[2]
            data = flags.to_bytes(size, "little")
            candidates = list(compress(known, map(data.__getitem__, known)))
            candidates += _ids(flags, memo[1], size)
        else:
            candidates = _ids(flags, 0, size)
        matches: list[int] = []
        tested = 0
        match = path_order.match
        for chunk in _chunks(candidates):
            hits = list(compress(chunk, map(match, map(lower.__getitem__, chunk))))
            matches += hits
            tested = chunk[-1] + 1
            for i in hits:
                if q not in lower[i] and (name_order is None or not name_order(names[i])):
                    found.append((i, 5))
                    if len(found) >= limit:
                        self._memo = (q, tested, matches)
                        return
        self._memo = (q, size, matches)


def _joined(lines: list[str]) -> str:
    """``"\n" + "\n".join(lines) + "\n"``, joined a slice at a time (short C calls)."""
    parts = ["\n".join(lines[at:at + _SLICE]) for at in range(0, len(lines), _SLICE)]
    return "\n" + "\n".join(parts) + "\n"


def _starts(lines: Sequence[str]) -> list[int]:
    """Where each line begins in ``"\\n" + "\\n".join(lines) + "\\n"``; the last: its end."""
    return list(accumulate((len(line) + 1 for line in lines), initial=1))


def _lines(text: str, starts: list[int], needle: str) -> Iterator[int]:
    """The lines of ``text`` holding ``needle``, in order, each once (``needle`` may start and
    end with the line breaks around a line)."""
    find = text.find
    skip = 1 if needle.startswith("\n") else 0
    at = 0
    while True:
        hit = find(needle, at)
        if hit < 0:
            return
        line = bisect_right(starts, hit + skip) - 1
        yield line
        at = starts[line + 1] - 1


def _ids(flags: int, start: int, size: int) -> list[int]:
    """The indexes from ``start`` on whose byte of ``flags`` is set."""
    if start >= size:
        return []
    data = (flags >> (8 * start) if start else flags).to_bytes(size - start, "little")
    if flags.bit_count() * 8 < size:  # few: found by the regular expression engine
        return [start + m.start() for m in _SET.finditer(data)]
    return list(compress(range(start, size), data))


def _chunks(ids: list[int]) -> Iterator[list[int]]:
    at, size = 0, _FIRST_CHUNK
    while at < len(ids):
        yield ids[at:at + size]
        at += size
        size = _CHUNK


def _in_order(q: str) -> re.Pattern[str]:
    """``q``'s letters in order, from the start of a path (the earliest of each after the last:
    linear, no backtracking)."""
    known = _compiled.get(q)
    if known is None:
        known = re.compile("".join(f"[^{re.escape(c)}]*+{re.escape(c)}" for c in q))
        if len(_compiled) > 512:
            _compiled.clear()
        _compiled[q] = known
    return known


_compiled: dict[str, re.Pattern[str]] = {}
