"""Which Pygments lexer colours a block: the fence's language (Pygments' aliases and a few of
the names agents write), a file name in the fence (```` ```src/app.tsx ````), or a guess when
the fence names none (only for blocks big enough to guess well; plain text when unsure)."""

from __future__ import annotations

import json
import re
from functools import lru_cache

from pygments.lexer import Lexer
from pygments.lexers import find_lexer_class_by_name, get_lexer_by_name, get_lexer_for_filename
from pygments.util import ClassNotFound

#: Names agents write that Pygments does not know (or knows as something else).
EXTRA_ALIASES = {
    "shell": "bash", "sh": "bash", "zsh": "bash", "console": "console", "terminal": "console",
    "shellsession": "console", "ts": "typescript", "py": "python", "py3": "python",
    "yml": "yaml", "jsonc": "json", "json5": "json", "dockerfile": "docker",
    "golang": "go", "rs": "rust", "c++": "cpp", "h": "c", "hpp": "cpp", "cs": "csharp",
    "kt": "kotlin", "rb": "ruby", "md": "markdown", "ps1": "powershell", "patch": "diff",
    "text": "text", "txt": "text", "plain": "text", "plaintext": "text", "output": "text",
}
#: What a guess may return: common languages, asked through their own ``analyse_text`` (Pygments'
#: ``guess_lexer`` imports all of its ~600 lexers first: most of a second on the GUI thread).
GUESSABLE = (
    "python", "bash", "javascript", "typescript", "rust", "go", "c", "cpp", "java", "json",
    "yaml", "toml", "html", "css", "sql", "diff", "ruby", "php", "docker", "make", "xml", "ini",
    "kotlin", "swift", "csharp", "lua",
)
#: The score (0..1) an ``analyse_text`` must give to be believed.
GUESS_SCORE = 0.3
#: A block is guessed only from this many lines on, and from its first characters only.
GUESS_MIN_LINES = 3
GUESS_MAX_CHARS = 4096
#: Signs of a few languages Pygments' own guess confuses (it takes Go for Python), checked first.
_SIGNS = (
    ("go", re.compile(r"^package \w+\s*$", re.M)),
    ("rust", re.compile(r"^\s*(?:pub )?fn \w+|^\s*let mut |^use \w+::", re.M)),
    ("python", re.compile(r"^\s*(?:def \w+\(|class \w+.*:$|from [\w.]+ import )", re.M)),
    ("typescript", re.compile(r"^\s*(?:interface \w+|type \w+ = )|: (?:string|number)\b", re.M)),
    ("javascript", re.compile(r"^\s*(?:const|let|function|export|import .* from)\b", re.M)),
)


@lru_cache(maxsize=256)
def lexer_for_fence(info: str) -> Lexer | None:
    """The lexer a fence's info string names (a language or a file name); None for plain
    text or a name nothing knows."""
    name = info.strip().split(" ")[0].strip("{}.").lower()
    if not name:
        return None
    name = EXTRA_ALIASES.get(name, name)
    if name == "text":
        return None
    try:
        return _options(get_lexer_by_name(name))
    except ClassNotFound:
        pass
    return lexer_for_path(info.strip().split(" ")[0])


@lru_cache(maxsize=256)
def lexer_for_path(path: str) -> Lexer | None:
    """The lexer of a file name (``src/app.tsx``, ``Dockerfile``); None when unknown."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    if not name or ("." not in name and name.lower() not in ("dockerfile", "makefile")):
        return None
    try:
        return _options(get_lexer_for_filename(name))
    except ClassNotFound:
        return None


def guess(code: str) -> Lexer | None:
    """A lexer for a block whose fence names no language, or None when unsure."""
    if code.count("\n") + 1 < GUESS_MIN_LINES:
        return None
    head = code[:GUESS_MAX_CHARS]
    stripped = head.lstrip()
    if stripped[:1] in "{[":
        try:
            json.loads(code)
        except ValueError:
            pass
        else:
            return lexer_for_fence("json")
    if stripped.startswith("$ "):
        return lexer_for_fence("console")
    for name, sign in _SIGNS:
        if sign.search(head):
            return lexer_for_fence(name)
    best, score = "", 0.0
    for name in GUESSABLE:
        rated = float(find_lexer_class_by_name(name).analyse_text(head))
        if rated > score:
            best, score = name, rated
    return lexer_for_fence(best) if score >= GUESS_SCORE else None


def _options(lexer: Lexer) -> Lexer:
    # Lines are cut by the caller: keep every newline and tab as they are.
    lexer.stripnl = False
    lexer.stripall = False
    lexer.ensurenl = False
    return lexer
