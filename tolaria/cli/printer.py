"""How ``tolaria run`` prints a run's events: ``--json``, plain text (piped), or the TTY mode.

Every write goes through ``Output``: when the reader goes away (``tolaria run ... | head -1``)
the first write that hits the closed pipe stops the run (``on_closed``: the runner aborts the
stream, so the agent's tree is killed) and everything after is dropped quietly. Without it,
each later event raised a BrokenPipeError traceback and the agent ran on.

Writes are flushed once per turn of the event loop, not once per event: a read of 256 KB from
the agent's pipe is hundreds of events, and a flush each cost a system call each (most of the
time of a flood in text or ``--json`` mode). What one turn of the loop wrote is flushed right
after it (``call_soon``), before anything else runs; a write to the other stream (stdout vs
stderr) flushes first, so the two keep their order on a shared terminal or file; ``Done`` and
the end of the run flush at once. Without a running loop every write is flushed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import re
import select
import stat
import sys
from collections.abc import Callable
from typing import IO

from tolaria.cli.terminal import for_terminal, json_line, json_string, no_surrogates
from tolaria.core.attachments.model import human_size
from tolaria.core.events import (
    STOP_CANCELLED,
    Attached,
    Diagnostic,
    Done,
    Error,
    Event,
    TextDelta,
    ToolDone,
    ToolStart,
    to_dict,
)
from tolaria.core.limits import WARNING_SOURCE, stopped_text

#: How often a piped stdout is checked for a reader that went away while nothing was written.
WATCH_S = 0.25

#: Writes held for the flush at most (then they go to the stream's own buffer).
_MOST_PENDING = 1024

#: ``Exit code N`` at the start of a shell tool's result (Claude Code, the demo agent).
_EXIT_CODE = re.compile(r"\AExit code (-?\d+)")


def tool_exit_code(output: str) -> int | None:
    match = _EXIT_CODE.match(output or "")
    return int(match.group(1)) if match else None


class Output:
    """stdout and stderr, written so that a closed reader ends the run instead of raising.

    Only stdout going away stops the run (that is where the answer goes); a closed stderr that
    is not the same pipe or terminal is silenced and the run goes on.
    """

    def __init__(self) -> None:
        #: stdout's reader is gone: nothing more is written, the run is being stopped.
        self.closed = False
        #: Called once, when stdout turns out closed (stops the run).
        self.on_closed: Callable[[], object] = lambda: None
        self._watch: asyncio.TimerHandle | None = None
        #: The stream written to and not flushed yet, what was written to it since (joined at
        #: the flush: one write of the text stream per turn of the loop), the flush scheduled.
        self._dirty: IO[str] | None = None
        self._pending: list[str] = []
        self._flush_soon: asyncio.Handle | None = None

    def write(self, stream: IO[str] | None, text: str) -> None:
        if self.closed or not text or stream is None:  # None: started with that fd closed
            return
        if self._dirty is not stream:
            if self._dirty is not None:
                self.flush()  # the other stream's text first: stdout and stderr keep their order
                if self.closed:
                    return
            self._dirty = stream
        pending = self._pending
        pending.append(text)
        if self._flush_soon is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop (a printer used on its own): flush every write
                self.flush()
                return
            self._flush_soon = loop.call_soon(self._flush_now)
        elif len(pending) >= _MOST_PENDING:
            self._write_pending(stream)

    def flush(self) -> None:
        """Write and flush what was written and not flushed yet (a closed reader stops the
        run)."""
        stream, self._dirty = self._dirty, None
        if stream is None:
            return
        if self._write_pending(stream):
            try:
                stream.flush()
            except OSError as exc:
                self._failed(stream, exc)

    def _write_pending(self, stream: IO[str]) -> bool:
        text, self._pending = "".join(self._pending), []
        if self.closed:
            return False
        try:
            stream.write(text)
        except OSError as exc:
            self._failed(stream, exc)
            return False
        return True

    def _flush_now(self) -> None:
        self._flush_soon = None
        self.flush()

    def _failed(self, stream: IO[str], exc: OSError) -> None:
        # EPIPE: the pipe's reader is gone; EIO: the terminal is (its window was closed).
        if not isinstance(exc, BrokenPipeError) and exc.errno not in (errno.EPIPE, errno.EIO):
            raise exc
        self._close(stream)

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Also notice a closed reader while nothing is written (an agent busy in a long tool):
        when stdout is a pipe or socket, look every ``WATCH_S`` for the error the kernel reports
        on a pipe whose reader is gone."""
        try:
            fd = sys.stdout.fileno()
            mode = os.fstat(fd).st_mode
        except (AttributeError, OSError, ValueError):
            return
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return
        if sys.platform == "win32":  # no poll(); a closed pipe is still seen at the next write
            return
        poller = select.poll()
        poller.register(fd, 0)  # no events asked: POLLERR and POLLHUP are always reported

        def check() -> None:
            if self.closed:
                return
            if any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0)):
                self._close(sys.stdout)
                return
            self._watch = loop.call_later(WATCH_S, check)

        self._watch = loop.call_later(WATCH_S, check)

    def unwatch(self) -> None:
        """The run is over: flush, and stop watching for a closed reader."""
        self.flush()
        if self._flush_soon is not None:
            self._flush_soon.cancel()
            self._flush_soon = None
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def out(self, text: str) -> None:
        self.write(sys.stdout, text)

    def err(self, text: str) -> None:
        self.write(sys.stderr, text)

    def _close(self, stream: IO[str]) -> None:
        """``stream`` failed: point it, and the other standard stream when it is the same pipe
        or terminal (``2>&1 | head -1``), at /dev/null (whatever Python still buffers for it
        would fail again at exit: "Exception ignored ... BrokenPipeError"); stop the run when
        stdout is among them."""
        silenced: list[IO[str]] = [stream]
        with contextlib.suppress(OSError, ValueError):
            broken = os.fstat(stream.fileno())
            null = os.open(os.devnull, os.O_WRONLY)
            silenced = []
            for other in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    same = os.fstat(other.fileno())
                    if (same.st_dev, same.st_ino) == (broken.st_dev, broken.st_ino):
                        os.dup2(null, other.fileno())
                        silenced.append(other)
            os.close(null)
        if sys.stdout in silenced and not self.closed:
            self.closed = True
            self.on_closed()


class Printer:
    """Base of the printers: the output and how to tell that the run is being stopped."""

    def __init__(self, output: Output | None = None) -> None:
        self.output = output or Output()
        #: True once a stop was asked for (Ctrl+C, ``tolaria abort``, a closed pipe): a tool
        #: failing after that was cancelled, as the window says.
        self.stopping: Callable[[], bool] = lambda: False
        #: Tool calls started and not finished: at ``Done`` they end as the window says
        #: (cancelled, or no result).
        self.open_tools: dict[str, ToolStart] = {}

    def __call__(self, event: Event) -> None:
        raise NotImplementedError

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The run starts on ``loop`` (the TTY printer's spinner ticks there)."""

    def detach(self) -> None:
        """The run is over."""
        self.output.flush()

    def track(self, event: Event) -> None:
        if isinstance(event, ToolStart):
            self.open_tools[event.tool_id] = event
        elif isinstance(event, ToolDone):
            self.open_tools.pop(event.tool_id, None)

    def unfinished_status(self, done: Done) -> str:
        """What a tool without a result became when the run ended so (the window's words)."""
        return "cancelled" if done.stop_reason == STOP_CANCELLED else "no result"

    def tool_status(self, event: ToolDone) -> str:
        if event.is_error:
            return "cancelled" if self.stopping() else "failed"
        return "done"


class JsonPrinter(Printer):
    def __init__(self, output: Output | None = None) -> None:
        super().__init__(output)
        #: The start of a text delta's line for each stream id (the same for every delta).
        self._delta_heads: dict[str, str] = {}

    def __call__(self, event: Event) -> None:
        if type(event) is TextDelta:  # most of a flood: the same line as below, built faster
            head = self._delta_heads.get(event.stream_id)
            if head is None:
                head = self._delta_heads[event.stream_id] = (
                    f'{{"stream_id": {json_string(event.stream_id)}, "kind": "text_delta", '
                    '"text": ')
            self.output.out(f"{head}{json_string(event.text)}}}\n")
            return
        self.output.out(json_line(to_dict(event)) + "\n")
        if isinstance(event, Done):
            self.output.flush()


class PlainPrinter(Printer):
    """Text to stdout as the agent wrote it; tool calls, errors and the final status to stderr
    (escaped when stderr is a terminal)."""

    def __init__(self, output: Output | None = None) -> None:
        super().__init__(output)
        self._after_tool = False
        self._err_tty = _isatty(sys.stderr)

    def _err_line(self, text: str) -> None:
        text = for_terminal(text) if self._err_tty else no_surrogates(text)
        self.output.err(text + "\n")

    def __call__(self, event: Event) -> None:
        if type(event) is TextDelta and not self._after_tool:  # most of a flood
            text = event.text
            self.output.out(text if text.isascii() else no_surrogates(text))
            return
        self.track(event)
        if isinstance(event, TextDelta):
            if self._after_tool:
                self.output.out("\n\n")
                self._after_tool = False
            self.output.out(no_surrogates(event.text))
        elif isinstance(event, ToolStart):
            self._after_tool = True
            summary = json.dumps(event.input, ensure_ascii=False)[:120]
            self._err_line(f"\n[tool {event.name}: {summary}]")
        elif isinstance(event, ToolDone):
            self._err_line(f"[tool {self.tool_status(event)}]")
        elif isinstance(event, Error):
            self._err_line(f"\nerror: {event.message}")
            if event.hint:
                self._err_line(f"hint: {event.hint}")
        elif isinstance(event, Diagnostic) and event.source in ("retry", "notice",
                                                                WARNING_SOURCE):
            self._err_line(f"[{event.message}]")  # notice: an MCP server left out, a tool limit
        elif isinstance(event, Attached):  # ADR 0028
            note = f"; {event.note}" if event.note else ""
            self._err_line(f"[attached {event.name} ({human_size(event.size)}) {event.how}{note}]")
        elif isinstance(event, Done):
            for _ in self.open_tools:
                self._err_line(f"[tool {self.unfinished_status(event)}]")
            self.output.out("\n")
            survivors = ", ".join(f"{s.name} ({s.pid})" for s in event.survivors)
            extra = f"; still alive: {survivors}" if survivors else ""
            if event.limit is not None:
                extra = f"; {stopped_text(event.limit, event.limit_value)}{extra}"
            self._err_line(f"[done: {event.stop_reason}, {event.duration_ms or 0} ms{extra}]")
            self.output.flush()


def _isatty(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False
