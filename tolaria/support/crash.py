"""Crash reports: an unhandled exception leaves a file behind, with secrets redacted.

``install`` hooks ``sys.excepthook`` and ``threading.excepthook`` and keeps the recent log lines
in memory; ``asyncio_handler`` is the event loop's exception handler (each loop sets it: the
window's qasync loop, ``tolaria run``'s loop). A report goes to ``<data dir>/crash-reports/``
(``TOLARIA_HOME`` respected; mode 0600 in a 0700 folder): version, platform, where it happened,
the traceback and the recent log lines. Never the process environment, never argv (a prompt may
hold anything). Everything written passes through the one secret policy,
tolaria/support/redact.py (and so do the log lines the process prints once ``install`` ran:
each handler of the root logger gets its ``RedactingFilter``): values of environment variables
whose names look secret wherever they appear, well-known key shapes (``sk-...``, ``ghp_...``),
``Bearer ...`` and ``FOO_TOKEN=...``.

The folder holds at most ``MAX_REPORTS`` files (oldest removed first) and one process writes at
most ``MAX_PER_PROCESS`` reports (an exception in a callback that fires 60 times a second must
not fill the disk). The window announces, once, the reports its previous runs left behind
(``unseen_notice``). Qt-free: the CLI uses it too.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import logging
import os
import platform
import sys
import threading
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

from tolaria import __version__
from tolaria.support import paths
from tolaria.support.redact import RedactingFilter, redact_text

# ``tolaria run`` registers its adapters' [env] secrets through this name (tolaria/cli/main.py).
from tolaria.support.redact import remember_secrets as remember_secrets

FOLDER = "crash-reports"
#: Reports kept in the folder; older ones are removed when a new one is written.
MAX_REPORTS = 10
#: Reports one process writes; later exceptions are only counted (and still printed/logged).
MAX_PER_PROCESS = 5
#: Recent log records kept in memory for the next report.
LOG_LINES = 100
#: Characters kept of one log line / of the whole traceback.
MAX_LINE_CHARS = 2000
MAX_TRACEBACK_CHARS = 200_000
#: The file (in the folder) naming the newest report the window has announced.
SEEN_FILE = ".announced"

def folder() -> Path:
    return paths.data_dir() / FOLDER


class _RecentLog(logging.Handler):
    """The last ``LOG_LINES`` formatted records (already redacted: a key logged once must not
    wait in memory for a report)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: collections.deque[str] = collections.deque(maxlen=LOG_LINES)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)  # redacted below even when no other handler did
        except Exception:
            return
        self.lines.append(redact_text(line[:MAX_LINE_CHARS * 4])[:MAX_LINE_CHARS])


_recent = _RecentLog()
_lock = threading.Lock()
_state: dict[str, Any] = {"kind": None, "written": 0}


def install(kind: str) -> None:
    """Hook unhandled exceptions of this process (``kind``: "gui" or "cli", named in the report).

    Idempotent; a second call only changes the kind. Call it after the logging is configured:
    the recent-log handler is added to the root logger, and without any other handler the
    warnings still go to stderr as Python's default would print them.
    """
    with _lock:
        first = _state["kind"] is None
        _state["kind"] = kind
    if not first:
        return
    root = logging.getLogger()
    if not root.handlers:  # nothing configured: keep Python's default (warnings to stderr)
        default = logging.StreamHandler()
        default.setLevel(logging.WARNING)
        root.addHandler(default)
    # What goes to stderr (or a log file) is redacted too. On each handler: a logger's own
    # filter does not see the records that propagate to it from tolaria.* loggers.
    root.addFilter(RedactingFilter())
    for handler in root.handlers:
        handler.addFilter(RedactingFilter())
    root.addHandler(_recent)
    previous_hook = sys.excepthook
    previous_thread_hook = threading.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException,
                   tb: TracebackType | None) -> None:
        if issubclass(exc_type, KeyboardInterrupt):  # Ctrl+C is no crash
            previous_hook(exc_type, exc, tb)
            return
        # No running loop: the exception unwound the whole program (it is about to end).
        fatal = _running_loop() is None and threading.current_thread() is threading.main_thread()
        path = write_report(exc, where="unhandled exception", fatal=fatal)
        if previous_hook is sys.__excepthook__:  # Python's own printout, minus the secrets
            _print_redacted(exc, "")
        else:
            previous_hook(exc_type, exc, tb)
        _tell(path)

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None and not isinstance(args.exc_value, SystemExit):
            name = args.thread.name if args.thread is not None else "?"
            path = write_report(args.exc_value, where=f"thread {name}", fatal=False)
            if previous_thread_hook is threading.__excepthook__:
                _print_redacted(args.exc_value, f"Exception in thread {name}:\n")
            else:
                previous_thread_hook(args)
            _tell(path)
        else:
            previous_thread_hook(args)

    sys.excepthook = excepthook
    threading.excepthook = thread_hook


def asyncio_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's exception handler: a report for an exception nobody handled, then the
    default handling (it logs)."""
    exc = context.get("exception")
    path = None
    if isinstance(exc, Exception):
        path = write_report(exc, where=f"event loop: {context.get('message', '')}"[:200],
                            fatal=False)
    loop.default_exception_handler(context)
    _tell(path)


def _print_redacted(exc: BaseException, heading: str) -> None:
    with contextlib.suppress(Exception):
        text = heading + "".join(traceback.format_exception(exc))
        print(redact_text(text), end="", file=sys.stderr, flush=True)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    with contextlib.suppress(RuntimeError):
        return asyncio.get_running_loop()
    return None


def _tell(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(Exception):
            print(f"tolaria: a crash report was saved at {path}", file=sys.stderr, flush=True)


def write_report(exc: BaseException, *, where: str, fatal: bool,
                 kind: str | None = None) -> Path | None:
    """Write a report for ``exc``; returns its path, or None (limit reached, or the folder is
    not writable). Never raises: it runs while something already went wrong."""
    try:
        with _lock:
            if _state["written"] >= MAX_PER_PROCESS:
                _state["written"] += 1
                return None
            _state["written"] += 1
            kind = kind or _state["kind"] or "python"
        return _write(exc, where=where, fatal=fatal, kind=kind)
    except Exception:
        return None


def _write(exc: BaseException, *, where: str, fatal: bool, kind: str) -> Path:
    now = dt.datetime.now(dt.UTC)
    trace = "".join(traceback.format_exception(exc))
    if len(trace) > MAX_TRACEBACK_CHARS:
        trace = trace[:MAX_TRACEBACK_CHARS // 2] + "\n[…cut…]\n" + trace[-MAX_TRACEBACK_CHARS // 2:]
    qt = sys.modules.get("PySide6")
    lines = [
        "Tolaria crash report",
        f"version: tolaria {__version__}",
        f"time: {now.isoformat(timespec='seconds')}",
        f"process: {kind} (pid {os.getpid()})",
        f"where: {where}",
        f"fatal: {'yes, the process ended' if fatal else 'no, the process went on'}",
        f"platform: {platform.platform()}",
        f"python: {platform.python_implementation()} {platform.python_version()}",
    ]
    if qt is not None:
        lines.append(f"pyside6: {getattr(qt, '__version__', '?')}")
    lines += ["", "traceback:", trace.rstrip(), "", "recent log lines (oldest first):",
              *(_recent.lines or ["(none)"]), ""]
    text = redact_text("\n".join(lines))
    where_to = folder()
    paths.private_dir(where_to)
    stamp = now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond:06d}"
    path = where_to / f"crash-{stamp}-{kind}-{os.getpid()}.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
        fh.write(text)
    prune()
    return path


def reports() -> list[Path]:
    """Existing reports, oldest first (their names sort by time)."""
    try:
        return sorted(p for p in folder().glob("crash-*.txt") if p.is_file())
    except OSError:
        return []


def prune(keep: int = MAX_REPORTS) -> None:
    found = reports()
    for old in found[:max(len(found) - keep, 0)]:
        with contextlib.suppress(OSError):
            old.unlink()


def unseen_notice(kind: str = "gui") -> list[str]:
    """The notice for the window: reports of ``kind`` written since the last announcement
    (none, or one sentence naming the newest). Marks them announced."""
    try:
        seen_file = folder() / SEEN_FILE
        seen = seen_file.read_text().strip() if seen_file.exists() else ""
        new = [p for p in reports() if f"-{kind}-" in p.name and p.name > seen]
        if not new:
            return []
        seen_file.write_text(new[-1].name + "\n")
        latest = new[-1]
        fatal = "fatal: yes" in latest.read_text(encoding="utf-8", errors="replace")
        what = "quit unexpectedly" if fatal else "ran into an unexpected error"
        more = f" ({len(new)} reports)" if len(new) > 1 else ""
        return [f"Tolaria {what} last time{more}; a report was saved at {latest}"]
    except OSError:
        return []
