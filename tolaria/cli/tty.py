"""``tolaria run`` on a terminal: colour, a spinner with the elapsed time, tool lines, the end.

The answer goes to stdout (agent colours kept, every other escape sequence removed: see
tolaria/cli/terminal.py); the rest goes to stderr: ``$ command`` for each shell tool with its
status (ok, failed or cancelled, and the exit code when the agent said it), other tools as
``● Name  what it was asked``, errors in red, and the stop reason with the duration at the end.
The spinner (stderr, only when stderr is a terminal too) redraws every 100 ms on its own line and
is erased before anything else is written, so it never ends up in a copy of the answer.
``NO_COLOR`` turns the colours off, nothing else.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time

from tolaria.cli.printer import Output, Printer, _isatty, tool_exit_code
from tolaria.cli.terminal import for_terminal
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_END_TURN,
    Diagnostic,
    Done,
    Error,
    Event,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    summarize_tool_input,
)
from tolaria.core.limits import WARNING_SOURCE, stopped_text

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
TICK_S = 0.1
_SUMMARY_CHARS = 160

RESET, BOLD, DIM = "\x1b[0m", "\x1b[1m", "\x1b[2m"
RED, GREEN, YELLOW, CYAN = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[36m"
CLEAR_LINE = "\r\x1b[K"


class TtyPrinter(Printer):
    def __init__(self, output: Output | None = None) -> None:
        super().__init__(output)
        self.colour = not os.environ.get("NO_COLOR")
        self.spin = _isatty(sys.stderr)
        self.started = time.monotonic()
        self.activity = "starting"
        self._frame = 0
        self._spinner_shown = False
        self._at_line_start = True  # of the terminal, shared by stdout and stderr
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- spinner ------------------------------------------------------------------------------
    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.started = time.monotonic()
        if self.spin:
            self._tick()

    def detach(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._erase_spinner()
        self.output.flush()

    def _tick(self) -> None:
        if self._at_line_start and not self.output.closed:
            elapsed = time.monotonic() - self.started
            frame = FRAMES[self._frame % len(FRAMES)]
            self._frame += 1
            # One terminal line at most: a wrapped spinner would leave its first line behind.
            room = shutil.get_terminal_size().columns - len(f"{frame} {elapsed:.1f}s ") - 1
            activity = self.activity if len(self.activity) <= room else \
                self.activity[:max(0, room - 1)] + "…"
            self.output.err(f"{CLEAR_LINE}{self._c(CYAN, frame)} {activity} "
                            f"{self._c(DIM, f'{elapsed:.1f}s')}")
            self._spinner_shown = True
        if self._loop is not None and not self._loop.is_closed():
            self._handle = self._loop.call_later(TICK_S, self._tick)

    def _erase_spinner(self) -> None:
        if self._spinner_shown:
            self.output.err(CLEAR_LINE)
            self._spinner_shown = False

    # -- writing ------------------------------------------------------------------------------
    def _c(self, style: str, text: str) -> str:
        return f"{style}{text}{RESET}" if self.colour else text

    def _out(self, text: str) -> None:
        self._erase_spinner()
        self.output.out(text)
        self._at_line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        """A line of our own on stderr, on a fresh line of the terminal."""
        self._erase_spinner()
        if not self._at_line_start:
            self.output.out("\n")
        self.output.err(text + "\n")
        self._at_line_start = True

    def __call__(self, event: Event) -> None:
        if isinstance(event, ToolDone):
            self._tool_done(event)  # before track(): it needs the tool's label
        self.track(event)
        if isinstance(event, TextDelta):
            self.activity = "writing"
            self._out(for_terminal(event.text, keep_sgr=self.colour))
        elif isinstance(event, ThinkingDelta):
            self.activity = "thinking"
        elif isinstance(event, ToolStart):
            self._tool_start(event)
        elif isinstance(event, Error):
            self._line(self._c(RED, f"error: {for_terminal(event.message)}"))
            if event.hint:
                self._line(self._c(YELLOW, f"hint: {for_terminal(event.hint)}"))
        elif isinstance(event, Diagnostic) and event.source == "retry":
            self._line(self._c(DIM, for_terminal(event.message)))
        elif isinstance(event, Diagnostic) and event.source == WARNING_SOURCE:
            self._line(self._c(YELLOW, f"⚠ {for_terminal(event.message)}"))
        elif isinstance(event, Done):
            self._done(event)

    def _tool_start(self, event: ToolStart) -> None:
        what = for_terminal(summarize_tool_input(event.input, _SUMMARY_CHARS))
        name = for_terminal(event.name or "tool")
        command = isinstance(event.input, dict) and isinstance(event.input.get("command"), str)
        label = f"$ {what}" if command else f"● {name}  {what}".rstrip()
        self.activity = f"running {label}"
        self._line(self._c(BOLD, label))

    def _tool_done(self, event: ToolDone) -> None:
        status = self.tool_status(event)
        code = tool_exit_code(event.output)
        suffix = f" (exit {code})" if code is not None else ""
        if status == "done":
            text = self._c(GREEN, "  ✓ ok" + suffix)
        elif status == "cancelled":
            text = self._c(YELLOW, "  ⊘ cancelled" + suffix)
        else:
            text = self._c(RED, "  ✗ failed" + suffix)
        self.activity = "thinking"
        self._line(text)

    def _done(self, event: Done) -> None:
        self.detach()
        for tool in self.open_tools.values():
            label = summarize_tool_input(tool.input, _SUMMARY_CHARS) or tool.name
            self._line(self._c(YELLOW, f"  ⊘ {self.unfinished_status(event)}: "
                                       f"{for_terminal(label)[:60]}"))
        seconds = f"{(event.duration_ms or 0) / 1000:.1f} s"
        if event.stop_reason == STOP_END_TURN:
            text = self._c(GREEN, f"■ done in {seconds}")
        elif event.stop_reason == STOP_CANCELLED and event.limit is not None:
            text = self._c(YELLOW, f"■ {stopped_text(event.limit, event.limit_value)} "
                                   f"after {seconds}")
        elif event.stop_reason == STOP_CANCELLED:
            text = self._c(YELLOW, f"■ cancelled after {seconds}")
        else:
            text = self._c(RED, f"■ stopped: {for_terminal(event.stop_reason)} after {seconds}")
        if event.survivors:
            alive = ", ".join(f"{s.name} ({s.pid})" for s in event.survivors)
            text += self._c(RED, f"; still alive: {for_terminal(alive)}")
        if not self._at_line_start:
            self._out("\n")
        self._line(text)
        self.output.flush()


def make_printer(as_json: bool) -> Printer:
    """``--json``; the TTY mode when stdout is a terminal; else plain text."""
    from tolaria.cli.printer import JsonPrinter, PlainPrinter

    if as_json:
        return JsonPrinter()
    if _isatty(sys.stdout) and os.environ.get("TERM") != "dumb":
        return TtyPrinter()
    return PlainPrinter()
