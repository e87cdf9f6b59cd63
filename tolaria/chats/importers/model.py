"""What an importer reads out of a CLI's own session store: plain records, no events yet.

Each importer (one module per CLI) turns its CLI's files into ``Session`` values; the import
itself (tolaria/chats/importing.py) turns those into stored turns and events. Kept apart so a
parser is a pure function of a file, tested on real files the CLIs wrote (tests/fixtures/sessions).
"""

from __future__ import annotations

import base64
import binascii
import json
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: A session file larger than this is reported and skipped (a JSONL session is MBs at most).
MAX_FILE_BYTES = 256 * 1024 * 1024


class SessionFormatError(ValueError):
    """A file that is not a session of the expected format; the message says why."""


@dataclass
class Tool:
    """One tool call and, once the result is known, its output."""

    tool_id: str
    name: str
    input: Any
    output: str | None = None
    is_error: bool = False
    #: The user stopped the call while it ran (the CLI recorded its own note to the model as
    #: the "result"): it has no result, and shows as its turn ended (``interrupted``), as a
    #: stopped tool of a live turn does, never as failed.
    stopped: bool = False

    def stop(self) -> None:
        """The CLI recorded this call as stopped by the user: no result, not an error."""
        self.output, self.is_error, self.stopped = None, False, True


@dataclass(frozen=True)
class Image:
    """An image of the prompt as the CLI kept it: its bytes (base64 or a ``data:`` URL in the
    session), or the path of the file it read. ``problem``: why neither can be had."""

    name: str
    data: bytes | None = None
    path: str | None = None
    problem: str | None = None


@dataclass
class Turn:
    """One user prompt and what the agent did in answer, in order: ``str`` items are text."""

    prompt: str
    items: list[str | Tool | Thinking] = field(default_factory=list)
    #: The images the user sent with the prompt (stored as the imported turn's attachments).
    images: list[Image] = field(default_factory=list)
    started_at: float | None = None
    #: The time of the turn's last record the CLI stamped (its answer's end when complete).
    ended_at: float | None = None
    #: The CLI's own id of the record that holds the prompt (Claude's and Qwen's ``uuid``,
    #: Codex's, Gemini's and opencode's message id): what a later import knows the turn by.
    record_id: str | None = None
    #: The turn's last record is a completed answer. False while the CLI is still writing it
    #: (a tool running, the model not answered yet) and for a turn that was cut off (stopped,
    #: crashed): imported as ``interrupted``, and completed by a later import if the CLI goes on.
    complete: bool = False

    def saw(self, at: float | None) -> None:
        """A record of this turn was written at ``at`` (seconds since the epoch, or None)."""
        if at is not None and (self.ended_at is None or at > self.ended_at):
            self.ended_at = at

    def duration_ms(self) -> int | None:
        """How long the CLI took, from its own time stamps; None when it did not stamp both."""
        if self.started_at is None or self.ended_at is None or self.ended_at < self.started_at:
            return None
        return round((self.ended_at - self.started_at) * 1000)

    def text(self, text: str) -> None:
        if text:
            self.items.append(text)

    def tool(self, tool: Tool) -> None:
        self.items.append(tool)


@dataclass(frozen=True)
class Thinking:
    text: str


@dataclass
class Session:
    """One CLI session: its own id (the next turn resumes it natively), folder and turns."""

    agent: str
    session_id: str
    source: Path
    cwd: str | None = None
    title: str | None = None
    turns: list[Turn] = field(default_factory=list)
    #: Lines that did not parse (a session written while the CLI crashed, say): skipped.
    bad_lines: int = 0
    #: The file ends in a record the CLI has not finished writing (a last line with no newline
    #: that does not parse): not a bad line, but the last turn is not complete yet.
    cut: bool = False

    def last_open(self) -> None:
        """A cut file: whatever its last turn looks like, the CLI is still writing it."""
        if self.cut and self.turns:
            self.turns[-1].complete = False


def answered(turn: Turn) -> bool:
    """The heuristic for CLIs that mark no turn end: the last item is text and every tool call
    has its result (a tool still running, or a result the model has not answered, is not)."""
    return (bool(turn.items) and isinstance(turn.items[-1], str)
            and all(i.output is not None or i.stopped for i in turn.items if isinstance(i, Tool)))


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """The JSON objects of a JSONL file, how many lines were not JSON objects, and whether the
    file ends in a record still being written (a last line without its newline that does not
    parse yet: not counted as bad)."""
    records: list[dict[str, Any]] = []
    bad = 0
    cut = False
    for line in _lines(path):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            if line.endswith("\n"):
                bad += 1
            else:
                cut = True  # only the last line of a file can lack its newline
            continue
        if isinstance(value, dict):
            records.append(value)
        else:
            bad += 1
    if not records:
        raise SessionFormatError("no JSON records in the file")
    return records, bad, cut


def _lines(path: Path) -> Iterator[str]:
    check_file(path)
    with path.open(encoding="utf-8", errors="replace") as fh:
        yield from fh


def check_file(path: Path) -> None:
    """A regular file of a sane size (never a FIFO or a device that would hang the import)."""
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode):
        raise SessionFormatError("not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise SessionFormatError(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")


def timestamp(value: Any) -> float | None:
    """Seconds since the epoch from an ISO 8601 string or a number of (milli)seconds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) / 1000.0 if value > 1e11 else float(value)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def text_of(content: Any) -> str:
    """Text of a message content that is a string or a list of ``{"text": ...}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content
                       if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def output_text(value: Any) -> str:
    """A tool result as text: strings as they are, structures as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        joined = text_of(value)
        if joined:
            return joined
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


_IMAGE_EXT = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif",
              "image/webp": ".webp"}


def image_name(name: Any, mime: Any, number: int) -> str:
    """The file name a CLI gave the image (no folder), else ``image-N`` with its type's suffix."""
    if isinstance(name, str) and name.strip():
        return name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or name
    ext = _IMAGE_EXT.get(mime, ".png") if isinstance(mime, str) else ".png"
    return f"image-{number}{ext}"


def image_from_base64(name: str, data: Any) -> Image:
    """An image from base64 text in the session (Claude's ``source.data``, Gemini's and Qwen's
    ``inlineData.data``)."""
    if not isinstance(data, str) or not data:
        return Image(name, problem="the session holds no image data for it")
    try:
        return Image(name, data=base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return Image(name, problem="its image data in the session is not valid base64")


def image_from_url(name: str, url: Any) -> Image:
    """An image from a ``data:image/...;base64,`` URL (Codex, opencode) or a ``file://`` URL."""
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url[:80]:
        return image_from_base64(name, url.split(",", 1)[1])
    if isinstance(url, str) and url.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return Image(name, path=unquote(urlparse(url).path))
    return Image(name, problem="the session names it but holds no image data for it")


#: Gemini CLI and Qwen Code put the files an ``@path`` read after the typed text, between these.
REFERENCED_START = "--- Content from referenced files ---"
REFERENCED_END = "--- End of content ---"


def typed_and_images(parts: Any) -> tuple[str, list[Image]]:
    """A Gemini/Qwen user message's parts: the text typed (the files its ``@path`` references
    read in are left out) and its images (``inlineData`` parts)."""
    if not isinstance(parts, list):
        return text_of(parts), []
    texts: list[str] = []
    images: list[Image] = []
    inside = False
    for part in parts:
        if not isinstance(part, dict):
            continue
        inline = part.get("inlineData")
        if isinstance(inline, dict) and str(inline.get("mimeType", "")).startswith("image/"):
            name = image_name(inline.get("displayName"), inline.get("mimeType"), len(images) + 1)
            images.append(image_from_base64(name, inline.get("data")))
            continue
        text = part.get("text")
        if not isinstance(text, str):
            continue
        if text.strip() == REFERENCED_START:
            inside = True
        elif text.strip() == REFERENCED_END:
            inside = False
        elif not inside:
            texts.append(text)
    return "".join(texts), images
