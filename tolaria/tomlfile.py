"""Hand-editable TOML files that the app also writes: ``settings.toml`` and user adapters.

Reading reports where a broken file is broken (file, line, problem). Writing edits the parsed
document in place (tomlkit), so comments, key order and keys the app does not know survive, and
replaces the file atomically: a temp file in the same folder, fsync, rename. A file that does
not parse is never written over: :class:`SettingsFileError` is raised instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
from tomlkit.toml_document import TOMLDocument

_LINE_RE = re.compile(r"at line (\d+)")
#: Mode of files the app creates: they may hold environment values such as tokens.
NEW_FILE_MODE = 0o600


class SettingsFileError(Exception):
    """A settings or adapter file that cannot be read or must not be written over."""

    def __init__(self, path: Path, line: int | None, problem: str) -> None:
        self.path = path
        self.line = line
        self.problem = problem
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {problem}")


def decode_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    """The line of a TOML syntax error (``lineno`` on Python 3.14+, the message before)."""
    line = getattr(exc, "lineno", None)
    if isinstance(line, int):
        return line
    found = _LINE_RE.search(str(exc))
    return int(found.group(1)) if found else None


def parse_text(raw: bytes, path: Path) -> tuple[str, dict[str, Any]]:
    """Decode and parse ``raw``; raise SettingsFileError naming the line of the first problem."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SettingsFileError(path, line, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
                                ) from exc
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = re.sub(r"at line \d+, ", "", str(exc))
        raise SettingsFileError(path, decode_error_line(exc), f"not valid TOML: {message}"
                                ) from exc


def read(path: Path) -> tuple[str, dict[str, Any]] | None:
    """The text and data of ``path``, None when it does not exist; SettingsFileError otherwise."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsFileError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    return parse_text(raw, path)


def load_document(path: Path) -> TOMLDocument:
    """The editable document of ``path`` (empty when missing); SettingsFileError if broken."""
    found = read(path)
    if found is None:
        return tomlkit.document()
    try:
        return tomlkit.parse(found[0])
    except tomlkit.exceptions.ParseError as exc:  # stricter than tomllib in rare cases
        raise SettingsFileError(path, exc.line, f"cannot be edited safely: {exc}") from exc


def key_line(text: str, table: str, key: str) -> int | None:
    """Best-effort line number of ``key`` in ``[table]`` (for problem messages)."""
    current = ""
    pattern = re.compile(rf"""\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
    dotted = re.compile(rf"\s*{re.escape(table)}\s*\.\s*{re.escape(key)}\s*=")
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[]").strip().replace(" ", "").replace('"', "")
            continue
        if (current == table and pattern.match(line)) or (current == "" and dotted.match(line)):
            return number
    return None


def table_line(text: str, table: str) -> int | None:
    """Best-effort line number of the ``[table]`` header."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("[") and not stripped.startswith("[["):
            name = stripped.split("]", 1)[0].strip("[ ").replace(" ", "").replace('"', "")
            if name == table:
                return number
    return None


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: temp file in the same folder, fsync, rename.

    A crash (or a failing rename) leaves the old file as it was and no temp file behind. An
    existing file keeps its permission bits; a new one is private (it may hold tokens).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    # The rename itself is durable only once the folder is synced (POSIX; not on Windows).
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def dump_checked(doc: TOMLDocument, path: Path) -> str:
    """``doc`` as text, checked to parse back (never write a file the app cannot read)."""
    text = tomlkit.dumps(doc)
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # a tomlkit bug: refuse rather than corrupt
        raise SettingsFileError(path, decode_error_line(exc),
                                f"the edited file would not be valid TOML ({exc}); not saved"
                                ) from exc
    return text
