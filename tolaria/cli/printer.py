"""How ``tolaria run`` prints a run's events: ``--json``, plain text (piped), or the TTY mode.

Every write goes through ``Output``: when the reader goes away (``tolaria run ... | head -1``)
the first write that hits the closed pipe stops the run (``on_closed``: the runner aborts the
stream, so the agent's tree is killed) and everything after is dropped quietly. Without it,
each later event raised a BrokenPipeError traceback and the agent ran on.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import select
import stat
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from tolaria.cli.terminal import for_terminal, json_line, no_surrogates
from tolaria.core.events import (
    STOP_CANCELLED,
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

if TYPE_CHECKING:
    import asyncio

#: How often a piped stdout is checked for a reader that went away while nothing was written.
WATCH_S = 0.25

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

    def write(self, stream: IO[str] | None, text: str) -> None:
        if self.closed or not text or stream is None:  # None: started with that fd closed
            return
        try:
            stream.write(text)
            stream.flush()
        except OSError as exc:
            # EPIPE: the pipe's reader is gone; EIO: the terminal is (its window was closed).
            if not isinstance(exc, BrokenPipeError) and exc.errno not in (errno.EPIPE, errno.EIO):
                raise
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
    def __call__(self, event: Event) -> None:
        self.output.out(json_line(to_dict(event)) + "\n")


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
        elif isinstance(event, Diagnostic) and event.source in ("retry", WARNING_SOURCE):
            self._err_line(f"[{event.message}]")
        elif isinstance(event, Done):
            for _ in self.open_tools:
                self._err_line(f"[tool {self.unfinished_status(event)}]")
            self.output.out("\n")
            survivors = ", ".join(f"{s.name} ({s.pid})" for s in event.survivors)
            extra = f"; still alive: {survivors}" if survivors else ""
            if event.limit is not None:
                extra = f"; {stopped_text(event.limit, event.limit_value)}{extra}"
            self._err_line(f"[done: {event.stop_reason}, {event.duration_ms or 0} ms{extra}]")


def _isatty(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False
