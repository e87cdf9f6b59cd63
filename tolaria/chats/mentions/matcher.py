"""Matching what follows ``@`` against a folder's paths, fast enough for every keystroke on a
100,000-file repository (bench/mention_picker.py; the window's budget is 50 ms).

A path matches when it holds the query's letters in order (case-insensitive). The ranks, best
first: 0 the name is the query, 1 the name starts with it, 2 the name contains it, 3 the path
contains it, 4 the name holds its letters in order, 5 the path does; within a rank shorter
paths come first.

Scoring 100,000 paths in Python per keystroke is too slow, so the work shrinks before Python
sees a path:

- built once (on the picker's worker thread): for each character, the paths holding it;
- a query starts from the paths holding its rarest character (or, when it extends the last
  query, from the last query's matches: typing only narrows), and the in-order test runs in the
  regular expression engine (a possessive pattern: linear, no backtracking) over those paths
  joined into one text when there are many;
- only the matches (complete, kept for the next keystroke) are ranked, and when there are too
  many for that, the best ranks are found first and the rest is left unranked by length.
"""

from __future__ import annotations

import bisect
import heapq
import re
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: Rows the picker shows.
DEFAULT_LIMIT = 50
#: Above this many candidates the in-order test scans one joined text (C) instead of a loop.
_SCAN_ABOVE = 4_000
#: Above this many matches only the name ranks are sorted (a short query matches nearly all).
_RANK_ALL_BELOW = 1_500
#: Above this many candidates a query is not matched completely (``_best_of_many``).
_COMPLETE_BELOW = 12_000
#: Matches ``_best_of_many`` takes from each of its two scans.
_SAMPLE = 3_000
_CHUNK = 256 * 1024


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


class MentionIndex:
    """The paths of one folder, ready to be matched. Built once; ``search`` keeps only the last
    query's matches (use one index per picker, or accept that two pickers share that memo)."""

    def __init__(self, files: Sequence[str], folders: Sequence[str] = ()) -> None:
        entries = [f"{d}/" for d in folders] + [f for f in files if "\n" not in f]
        self._entries = entries
        self._lower = [e.lower() for e in entries]
        self._names = [low[low.rstrip("/").rfind("/") + 1:] for low in self._lower]
        self._text = "\n".join(self._lower) + "\n"
        starts = [0]
        total = 0
        for low in self._lower:
            total += len(low) + 1
            starts.append(total)
        self._starts = starts
        #: The text cut at line ends every ~256 KB (the in-order scan stops between chunks).
        self._chunks: list[tuple[int, int]] = []
        at = 0
        while at < len(self._text):
            cut = self._text.find("\n", at + _CHUNK)
            cut = len(self._text) if cut < 0 else cut + 1
            self._chunks.append((at, cut))
            at = cut
        self._names_text = "\n".join(self._names) + "\n"
        self._name_starts = [0]
        total = 0
        for name in self._names:
            total += len(name) + 1
            self._name_starts.append(total)
        by_char: dict[str, array[int]] = {}
        for i, low in enumerate(self._lower):
            for ch in set(low):
                bucket = by_char.get(ch)
                if bucket is None:
                    bucket = by_char[ch] = array("i")
                bucket.append(i)
        self._by_char = by_char
        # No query: the top level first (folders, then files), then by depth. Only the
        # shallowest are sorted: one long sort is a single C call that would hold the GIL (and
        # so the window) for a while on the worker thread.
        by_depth: dict[int, list[int]] = {}
        for i, low in enumerate(self._lower):
            by_depth.setdefault(low.rstrip("/").count("/"), []).append(i)
        top: list[int] = []
        for depth in sorted(by_depth):
            level = by_depth[depth]
            if len(level) > 4 * DEFAULT_LIMIT * 4:
                level = level[: 4 * DEFAULT_LIMIT * 4]
            top += sorted(level, key=lambda i: (not entries[i].endswith("/"), self._lower[i]))
            if len(top) >= DEFAULT_LIMIT * 4:
                break
        self._top = top[: DEFAULT_LIMIT * 4]
        self._memo: tuple[str, list[int]] | None = None
        self._known = frozenset(entries)

    def has(self, path: str) -> bool:
        """Whether ``path`` (a folder with its ``/``, or without) is offered."""
        return path in self._known or f"{path.rstrip('/')}/" in self._known

    def __len__(self) -> int:
        return len(self._entries)

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Match]:
        q = query.lower().replace("\\", "/").strip().replace("\n", "")
        if not q:
            return [Match(self._entries[i], 6) for i in self._top[:limit]]
        candidates = self._candidates(q)
        if len(candidates) > _COMPLETE_BELOW:
            self._memo = None
            ranked = self._best_of_many(q, limit + 1)  # may leave a complete memo
        else:
            matched = self._matches(q, candidates)
            self._memo = (q, matched)
            ranked = self._ranked(q, matched, limit + 1)
        # "src/" typed (or chosen with Tab): its contents, not the folder itself.
        return [Match(self._entries[i], rank) for i, rank in ranked
                if self._lower[i] != q][:limit]

    def _candidates(self, q: str) -> Sequence[int]:
        """Paths that may match: the last query's matches when ``q`` extends it, else the
        paths holding ``q``'s rarest character."""
        memo = self._memo
        if memo is not None and q.startswith(memo[0]):
            return memo[1]
        buckets = [self._by_char.get(ch) for ch in set(q)]
        if any(b is None for b in buckets):
            return []
        return min((b for b in buckets if b is not None), key=len)

    def _best_of_many(self, q: str, limit: int) -> list[tuple[int, int]]:
        """Too many candidates to test one by one (a short query): the regular expression
        engine finds the first ``_SAMPLE`` names holding ``q`` and, if they are not enough, the
        first ``_SAMPLE`` paths holding its letters in order; the shortest of them win."""
        entries, names, lower = self._entries, self._names, self._lower
        found: dict[int, tuple[int, int]] = {}
        if "/" not in q:
            literal = _literal(q)
            for line in _lines(literal, self._names_text, self._name_starts, _SAMPLE):
                found[line] = (self._rank(q, names[line], lower[line], None), len(entries[line]))
        if len(found) < limit:
            for line in _lines(_literal(q), self._text, self._starts, _SAMPLE):
                if line not in found:
                    found[line] = (3, len(entries[line]))
        if len(found) < limit:
            # Letters in order: a chunk of the text at a time, stopping once enough are found
            # (they rank last); a scan that went through is the query's complete matches.
            pattern, lines = _in_order(q), []
            for start, end in self._chunks:
                for m in pattern.finditer(self._text, start, end):
                    lines.append(bisect.bisect_right(self._starts, m.start()) - 1)
                if len(lines) >= _SAMPLE or len(found) + len(lines) >= 2 * limit:
                    break
            else:
                self._memo = (q, lines)
            for line in lines:
                if line not in found:
                    found[line] = (3 if q in lower[line] else 5, len(entries[line]))
        ordered = sorted(found.items(), key=lambda item: (*item[1], lower[item[0]]))
        return [(i, rank) for i, (rank, _) in ordered[:limit]]

    def _matches(self, q: str, candidates: Sequence[int]) -> list[int]:
        """Every path of ``candidates`` holding ``q``'s letters in order, in index order."""
        if len(q) == 1:
            return list(candidates)
        pattern = _in_order(q)
        if len(candidates) <= _SCAN_ABOVE:
            search, lower = pattern.search, self._lower
            return [i for i in candidates if search(lower[i])]
        if len(candidates) == len(self._entries):
            text, starts, ids = self._text, self._starts, None
        else:
            text = "\n".join([self._lower[i] for i in candidates]) + "\n"
            ids = candidates
            starts = [0]
            total = 0
            lower = self._lower
            for i in candidates:
                total += len(lower[i]) + 1
                starts.append(total)
        found = []
        for m in pattern.finditer(text):
            line = bisect.bisect_right(starts, m.start()) - 1
            found.append(ids[line] if ids is not None else line)
        return found

    def _ranked(self, q: str, matched: list[int], limit: int) -> list[tuple[int, int]]:
        entries, names, lower = self._entries, self._names, self._lower
        slashed = "/" in q
        if len(matched) <= _RANK_ALL_BELOW:
            name_order = None if slashed else _in_order(q).search
            scored = [(self._rank(q, names[i], lower[i], name_order), len(entries[i]), i)
                      for i in matched]
        else:
            # Many: string tests only (no name-in-order rank), and the best few sorted.
            scored = [((0 if names[i].rstrip("/") == q else 1 if names[i].startswith(q)
                        else 2 if q in names[i] else 3 if q in lower[i] else 5)
                       if not slashed else (3 if q in lower[i] else 5), len(entries[i]), i)
                      for i in matched]
            scored = heapq.nsmallest(limit, scored)
        scored.sort(key=lambda s: (s[0], s[1], lower[s[2]]))
        return [(i, rank) for rank, _, i in scored[:limit]]

    @staticmethod
    def _rank(q: str, name: str, path: str, name_order: object) -> int:
        bare = name.rstrip("/")
        if bare == q:
            return 0
        if bare.startswith(q):
            return 1
        if q in bare:
            return 2
        if q in path:
            return 3
        if callable(name_order) and name_order(bare):
            return 4
        return 5


def _in_order(q: str) -> re.Pattern[str]:
    """``q``'s letters in order on one line, then the rest of the line (one match a line)."""
    known = _compiled.get(q)
    if known is None:
        body = "".join(f"[^\\n{re.escape(c)}]*+{re.escape(c)}" for c in q[1:])
        known = re.compile(f"{re.escape(q[0])}{body}[^\\n]*+")
        if len(_compiled) > 512:
            _compiled.clear()
        _compiled[q] = known
    return known


def _literal(q: str) -> re.Pattern[str]:
    """``q`` itself, then the rest of the line (one match a line)."""
    return _compiled_get("\n" + q, lambda: re.compile(re.escape(q) + "[^\\n]*+"))


def _compiled_get(key: str, make: Callable[[], re.Pattern[str]]) -> re.Pattern[str]:
    known = _compiled.get(key)
    if known is None:
        known = make()
        if len(_compiled) > 512:
            _compiled.clear()
        _compiled[key] = known
    return known


def _lines(pattern: re.Pattern[str], text: str, starts: list[int], most: int) -> list[int]:
    """The first ``most`` lines of ``text`` where ``pattern`` matches (one match a line)."""
    found = []
    for m in pattern.finditer(text):
        found.append(bisect.bisect_right(starts, m.start()) - 1)
        if len(found) >= most:
            break
    return found


_compiled: dict[str, re.Pattern[str]] = {}
