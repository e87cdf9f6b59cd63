"""Readers of the CLIs' own stored sessions (Claude Code, Codex, Gemini CLI, Qwen Code, opencode).

Each module reads its CLI's real on-disk format into ``model.Session`` values and never writes
to the CLI's files; tolaria/chats/importing.py stores them as chats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tolaria.chats.importers import claude, codex, gemini, opencode, qwen
from tolaria.chats.importers.model import Session


@dataclass(frozen=True)
class Importer:
    agent: str
    label: str
    #: The session files (or databases) under a home folder.
    find: Callable[[Path], Iterator[Path]]
    #: The sessions of one file; raises SessionFormatError (or OSError) for a bad one.
    read: Callable[[Path], list[Session]]


def _one(parse: Callable[[Path], Session]) -> Callable[[Path], list[Session]]:
    return lambda path: [parse(path)]


IMPORTERS: dict[str, Importer] = {
    "claude": Importer("claude", "Claude Code", claude.find, _one(claude.parse)),
    "codex": Importer("codex", "Codex", codex.find, _one(codex.parse)),
    "gemini": Importer("gemini", "Gemini CLI", gemini.find, _one(gemini.parse)),
    "qwen": Importer("qwen", "Qwen Code", qwen.find, _one(qwen.parse)),
    "opencode": Importer("opencode", "opencode", opencode.find, opencode.parse_all),
}
