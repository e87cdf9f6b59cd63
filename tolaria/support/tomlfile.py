"""Hand-editable TOML files that the app also writes: ``settings.toml`` and user adapters.

Reading reports where a broken file is broken (file, line, problem). Writing edits the parsed
document in place (tomlkit), so comments, key order and keys the app does not know survive, and
replaces the file atomically: a temp file in the same folder, fsync, rename. A file that does
not parse is never written over: :class:`SettingsFileError` is raised instead.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import stat
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
from tomlkit.items import InlineTable

_LINE_RE = re.compile(r"at line (\d+)")
LOCK_TIMEOUT_S = 5.0
#: Mode of files the app creates: they may hold environment values such as tokens.
NEW_FILE_MODE = 0o600
#: A settings or adapter file larger than this is refused (a hand-written one is a few KiB).
MAX_FILE_BYTES = 1024 * 1024


class SettingsFileError(ValueError):
    """A settings or adapter file that cannot be read or must not be written over (a
    ValueError, like tomllib's own decode error)."""

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


def read_bytes(path: Path, limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of the regular file ``path`` (a symlink to one is fine), None when it does not
    exist; SettingsFileError when it cannot be read, is no regular file, or exceeds ``limit``.

    Hostile files must not hang or exhaust the app: a FIFO would block ``open`` until a writer
    comes (so it is opened non-blocking and refused), ``/dev/zero`` never ends (refused, and
    every read is capped anyway).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsFileError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SettingsFileError(path, None, f"not a regular file ({_kind(info.st_mode)}); "
                                                "ignored")
        if info.st_size > limit:
            raise SettingsFileError(path, None, f"too large ({info.st_size} bytes; the limit is "
                                                f"{limit} bytes); ignored")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(65536, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while we read it
                raise SettingsFileError(path, None, f"too large (over {limit} bytes); ignored")
        return b"".join(chunks)
    except OSError as exc:
        raise SettingsFileError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def read(path: Path) -> tuple[str, dict[str, Any]] | None:
    """The text and data of ``path``, None when it does not exist; SettingsFileError otherwise
    (also for a FIFO, a device or a file over 1 MiB: see :func:`read_bytes`)."""
    raw = read_bytes(path)
    return None if raw is None else parse_text(raw, path)


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


#: Makes an empty table inside ``parent`` (a plain dict, or a tomlkit table of the right kind).
TableFactory = Callable[[Any, bool], Any]
#: Applies one edit to a root mapping; returns whether it changed anything.
Change = Callable[[Any, TableFactory], bool]


def _plain_table(parent: Any, super_table: bool) -> dict[str, Any]:
    return {}


def _toml_table(parent: Any, super_table: bool) -> Any:
    # An inline table can only hold inline tables; a new top-level table whose children are
    # tables is a "super table", written as [a.b] without an empty [a] header.
    if isinstance(parent, InlineTable):
        return tomlkit.inline_table()
    return tomlkit.table(is_super_table=super_table)


def edit(path: Path, change: Change) -> bool:
    """Apply ``change`` to the file at ``path`` in place, atomically; False if nothing changed.

    Raises SettingsFileError, writing nothing, when the file is broken or when the edit cannot
    be made faithfully (see :func:`edited_text`).
    """
    with folder_lock(path):
        found = read(path)
        text, data = found if found is not None else ("", {})
        new_text = edited_text(text, data, path, change)
        if new_text is None:
            return False
        write_atomic(path, new_text)
        return True


@contextlib.contextmanager
def folder_lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Serialise read-modify-write of ``path`` between Tolaria processes (the window, a second
    window, a CLI command), so one save never drops another's change.

    An advisory ``flock`` on the file's folder (no lock file to leave behind); editors do not
    take it, which is fine: a hand-edit made meanwhile is read again by the next save. Where
    ``fcntl`` does not exist (Windows: a folder cannot even be opened there) saves are not
    serialised; ``msvcrt.locking`` on a lock file would do, untested so not written (ADR 0014).
    """
    if sys.platform == "win32":  # pragma: no cover
        yield
        return
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SettingsFileError(path, None, "another Tolaria process has been "
                                                        f"saving it for {timeout:g} s; not "
                                                        "saved, try again") from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the lock


def edited_text(text: str, data: dict[str, Any], path: Path, change: Change) -> str | None:
    """``text`` (which parses to ``data``) with ``change`` applied; None if nothing changed.

    The change is applied twice: to the plain data (what the file must mean afterwards) and to
    the tomlkit document (which keeps comments and layout). The text is returned only if it
    parses back to exactly that data: a hand-written layout tomlkit cannot edit faithfully
    (dotted keys spread over tables, some inline tables) raises SettingsFileError instead of
    silently changing some other setting.
    """
    expected = copy.deepcopy(data)
    if not change(expected, _plain_table) or expected == data:
        return None
    try:
        doc = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:  # stricter than tomllib in rare cases
        raise SettingsFileError(path, exc.line, f"cannot be edited safely: {exc}") from exc
    try:
        change(doc, _toml_table)
        new_text = tomlkit.dumps(doc)
    except SettingsFileError:
        raise
    except Exception as exc:  # tomlkit refuses some edits (a table inside an inline table)
        raise SettingsFileError(path, None, f"cannot be edited by the app ({exc}); edit it by "
                                            "hand, or write the table with a [header]") from exc
    try:
        written = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        written = {"<invalid>": str(exc)}
    if written != expected:
        raise SettingsFileError(path, None, "its layout (dotted keys or inline tables) cannot be "
                                            "edited by the app without changing other settings; "
                                            "nothing was saved: edit it by hand, or use [table] "
                                            "headers")
    return new_text
