"""The @-mention matcher: ranks, and the narrowing per keystroke never changes what matches."""

from __future__ import annotations

import random

import pytest

from tolaria.chats.mentions import matcher
from tolaria.chats.mentions.listing import folders_of
from tolaria.chats.mentions.matcher import MentionIndex

FILES = ["README.md", "src/composer.py", "src/ui/composer/assist.py", "src/ui/compose_view.py",
         "docs/composer-notes.md", "tests/test_composer.py", "src/core/matcher.py",
         "src/core/match_tools.py", "lib/m/t/c/h/r.txt"]


def index() -> MentionIndex:
    return MentionIndex(FILES, folders_of(FILES))


def test_name_ranks_before_path_and_in_order_matches() -> None:
    found = [m.path for m in index().search("composer")]
    assert found[0] == "src/ui/composer/"  # the name is the query
    assert found[1] == "src/composer.py"  # the name starts with it, shortest first
    assert "tests/test_composer.py" in found  # the name contains it
    assert found.index("tests/test_composer.py") < found.index("src/ui/composer/assist.py")
    assert "src/ui/compose_view.py" not in found  # no "r" after "compose" in it


def test_letters_in_order_and_folders_too() -> None:
    found = [m.path for m in index().search("mtchr")]
    assert found[0] == "src/core/matcher.py"  # in order within the name beats the path
    assert "lib/m/t/c/h/r.txt" in found
    folders = [m for m in index().search("ui") if m.is_folder]
    assert folders and folders[0].path == "src/ui/" and folders[0].name == "ui/"
    assert folders[0].parent == "src"


def test_a_slash_matches_the_path_and_case_does_not_matter() -> None:
    found = [m.path for m in index().search("UI/Comp")]
    assert found[:2] == ["src/ui/composer/", "src/ui/compose_view.py"]


def test_no_query_lists_the_top_level_first() -> None:
    top = [m.path for m in index().search("")][:5]
    assert top[:4] == ["docs/", "lib/", "src/", "tests/"]
    assert top[4] == "README.md"


def test_nothing_found() -> None:
    assert index().search("zzz") == []
    assert index().search("q") == []


def _files(count: int) -> list[str]:
    rnd = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "omega", "src", "lib", "view", "x1", "y_2"]
    return sorted({"/".join(rnd.choice(words) for _ in range(rnd.randint(1, 4)))
                   + rnd.choice([".py", ".md", ".rs"]) for _ in range(count)})


QUERIES = ("alphaview", "src/gam", "y_2.m", "omega.r", "l/b")


def test_typing_narrows_to_the_same_results_as_a_fresh_search() -> None:
    files = _files(20_000)
    typed = MentionIndex(files, folders_of(files))
    for query in QUERIES:
        for end in range(1, len(query) + 1):
            q = query[:end]
            fresh = MentionIndex(files, folders_of(files))
            assert typed.search(q) == fresh.search(q), q
            for match in fresh.search(q):
                assert _in_order(q, match.path), (q, match.path)


def test_a_small_folder_is_matched_completely() -> None:
    files = _files(2_000)
    folders = folders_of(files)
    index = MentionIndex(files, folders)
    for query in QUERIES:
        for end in range(1, len(query) + 1):
            q = query[:end]
            expected = {p for p in [*files, *(f"{d}/" for d in folders)]
                        if _in_order(q, p) and p != q}
            assert {m.path for m in index.search(q, limit=10**6)} == expected, q


def _in_order(q: str, path: str) -> bool:
    at = 0
    low = path.lower()
    for ch in q.lower():
        at = low.find(ch, at) + 1
        if not at:
            return False
    return True


def test_has_knows_files_and_folders() -> None:
    idx = index()
    assert idx.has("src/composer.py") and idx.has("src/ui") and idx.has("src/ui/")
    assert not idx.has("src/nope.py")


def _reference(entries: list[str], query: str, limit: int) -> list[tuple[str, int]]:
    """The ranking spelled out (matcher.py's docstring), every path scored: what the index,
    the implementation before it where it ranked completely, and any keystroke must give."""
    q = query.lower().replace("\\", "/").strip()
    scored = []
    for entry in entries:
        low = entry.lower()
        if not _in_order(q, low) or low == q:
            continue
        name = low[low.rstrip("/").rfind("/") + 1:].rstrip("/")
        if "/" in q:
            rank = 3 if q in low else 5
        else:
            rank = (0 if name == q else 1 if name.startswith(q) else 2 if q in name
                    else 3 if q in low else 4 if _in_order(q, name) else 5)
        scored.append((rank, len(entry), low, entry))
    scored.sort(key=lambda s: s[:3])
    return [(entry, rank) for rank, _, _, entry in scored[:limit]]


@pytest.mark.parametrize("few", [20_000, 40])
def test_every_keystroke_ranks_as_scoring_every_path(few: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Random queries typed a letter at a time (and some retyped after a Backspace), on a folder
    where the index narrows, tests candidates or scans the joined text (``few``: when it
    switches) and stops early: always the reference's rows."""
    monkeypatch.setattr(matcher, "_FEW", few)
    rnd = random.Random(26)
    files = _files(6_000) + [f"deep/{i % 97}/x{i}_mtchr.py" for i in range(1_000)]
    folders = folders_of(files)
    entries = [f"{d}/" for d in folders] + files
    typed = MentionIndex(files, folders)
    alphabet = "abeglmorstvwxy_./12"
    queries = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 6)))
               for _ in range(12)]
    queries += [rnd.choice(entries).lower()[rnd.randint(0, 6):][:rnd.randint(2, 10)]
                for _ in range(12)]
    queries += ["mtchr", "x1_m", "alpha", "/", "deep/1"]
    for query in queries:
        for end in [*range(1, len(query) + 1), max(1, len(query) - 1), len(query)]:
            q = query[:end]
            expected = _reference(entries, q, 50)
            assert [(m.path, m.rank) for m in typed.search(q)] == expected, q
            assert [(m.path, m.rank) for m in typed.search(q, 7)] == expected[:7], q
