"""A mention in the typed prompt, and what each agent is sent for it.

The composer writes a mention as ``@path`` (relative to the chat's folder), or ``@"a path"`` when
the path holds a space. The typed prompt is stored as typed; what the agent gets depends on it:

- ``at``: Claude Code, Gemini CLI and Qwen Code read ``@path`` themselves (they attach the file
  or list the folder): ``@path`` is kept. Gemini and Qwen take a space escaped with ``\\``;
  Claude has no spelling for it, so such a path goes as in ``path``.
- ``path``: every other agent gets the path itself (its working folder is the chat's folder, so
  a relative path means the same file to it); a path with a space in double quotes.

Only a mention of a file or folder that exists in the chat's folder is rewritten; ``a@b.com``,
``@someone`` or a path that is gone stays as typed. For a chat whose folder is on a host,
``exists`` says what is there (its listing, chats/mentions/hosted.py): nothing local is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

AT = "at"
PATH = "path"

#: Protocols whose CLI expands ``@path`` itself (checked against each CLI's docs).
_AT_PROTOCOLS = {"claude-stream-json": "claude", "gemini-stream-json": "gemini",
                 "qwen-stream-json": "gemini"}

#: ``@`` at the start or after a space or an opening bracket, then a quoted or a bare path.
MENTION_RE = re.compile(r'(?<![^\s(\[{])@(?:"([^"\n\0]+)"|([^\s"\0]+))')


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    path: str


def mention_form(protocol: str) -> str:
    return AT if protocol in _AT_PROTOCOLS else PATH


def spell(path: str) -> str:
    """How the composer writes a mention of ``path`` (a folder ends with ``/``)."""
    return f'@"{path}"' if any(c.isspace() for c in path) or '"' in path else f"@{path}"


def find_mentions(prompt: str, cwd: str | None,
                  exists: Callable[[str], bool] | None = None) -> list[Mention]:
    """The mentions of ``prompt`` that name an existing file or folder of ``cwd`` (``exists``:
    whether a relative path is there, instead of looking in this machine's ``cwd``)."""
    if not cwd or "@" not in prompt:
        return []
    found = []
    for m in MENTION_RE.finditer(prompt):
        path = m.group(1) or m.group(2) or ""
        if m.group(2):  # a bare path: a sentence's full stop or comma is not part of it
            stripped = path.rstrip(".,;:!?)]}'")
            end = m.end() - (len(path) - len(stripped))
            path = stripped
        else:
            end = m.end()
        if path and (exists(path) if exists is not None else _exists(cwd, path)):
            found.append(Mention(m.start(), end, path))
    return found


def _exists(cwd: str, path: str) -> bool:
    full = path if os.path.isabs(path) else os.path.join(cwd, path)
    try:
        return os.path.lexists(full)
    except (OSError, ValueError):
        return False


def render_mentions(prompt: str, protocol: str, cwd: str | None,
                    exists: Callable[[str], bool] | None = None) -> str:
    """``prompt`` as the agent of ``protocol`` is sent it (see the module's doc)."""
    mentions = find_mentions(prompt, cwd, exists)
    if not mentions:
        return prompt
    flavour = _AT_PROTOCOLS.get(protocol)
    parts: list[str] = []
    at = 0
    for mention in mentions:
        parts.append(prompt[at:mention.start])
        parts.append(_rendered(mention.path, flavour))
        at = mention.end
    parts.append(prompt[at:])
    return "".join(parts)


def _rendered(path: str, flavour: str | None) -> str:
    spaced = any(c.isspace() for c in path) or '"' in path
    if flavour == "gemini" and spaced and '"' not in path and "\n" not in path:
        return "@" + re.sub(r"(\s)", r"\\\1", path)
    if flavour is not None and not spaced:
        return f"@{path}"
    return f'"{path}"' if spaced else path
