"""The agent's own slash commands, for the composer's ``/`` menu.

Claude Code reads custom commands from Markdown files: the project's ``.claude/commands`` and the
user's ``~/.claude/commands``; a file ``a/b.md`` is the command ``/a:b``, its description the
``description:`` of its YAML front matter, else the first line of its text. (ACP agents send
theirs in ``available_commands_update``.) Reading is bounded: a few hundred files, the start of
each.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: Files read per folder, and bytes read per file.
MAX_FILES = 300
MAX_BYTES = 8192
PROJECT = "project"
USER = "user"


@dataclass(frozen=True)
class AgentCommand:
    #: Without the ``/``.
    name: str
    description: str
    #: ``project``, ``user`` or ``agent`` (sent by the agent itself).
    source: str


def claude_commands(cwd: str | None, home: str | None = None) -> list[AgentCommand]:
    """The project's commands, then the user's (a project command hides a user one of the same
    name, as in Claude Code)."""
    found: dict[str, AgentCommand] = {}
    user_home = home if home is not None else os.path.expanduser("~")
    folders = []
    if cwd:
        folders.append((Path(cwd) / ".claude" / "commands", PROJECT))
    if user_home:
        folders.append((Path(user_home) / ".claude" / "commands", USER))
    for folder, source in folders:
        for command in _read_folder(folder, source):
            found.setdefault(command.name, command)
    return sorted(found.values(), key=lambda c: c.name)


def _read_folder(folder: Path, source: str) -> list[AgentCommand]:
    commands: list[AgentCommand] = []
    if not folder.is_dir():
        return commands
    for path in _markdown_files(folder):
        rel = path.relative_to(folder).with_suffix("")
        name = ":".join(rel.parts)
        if not name or any(c.isspace() for c in name):
            continue
        commands.append(AgentCommand(name, describe(_head(path)), source))
    return commands


def _markdown_files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".md"):
                found.append(Path(parent) / name)
                if len(found) >= MAX_FILES:
                    return found
    return found


def _head(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            return fh.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def describe(text: str) -> str:
    """The ``description`` of the front matter, else the first line of text (one line, short)."""
    lines = text.splitlines()
    body = lines
    if lines and lines[0].strip() == "---":
        for i, line in enumerate(lines[1:], 1):
            if line.strip() == "---":
                body = lines[i + 1:]
                break
            key, sep, value = line.partition(":")
            if sep and key.strip() == "description":
                return _short(value.strip().strip("\"'"))
    first = next((line.strip().lstrip("#").strip() for line in body if line.strip()), "")
    return _short(first)


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
