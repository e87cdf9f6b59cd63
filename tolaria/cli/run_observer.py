"""``tolaria run``'s observer of the turn engine (tolaria/chats/engine/): the window's bridge
emits signals, this prints. Each event goes to the printer as it passes the engine's gate (the
store has it already); the printer's spinner and closed-pipe watch start when the agent does;
the final ``Done`` is printed and kept for the exit code."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tolaria.chats.engine import QuietObserver
from tolaria.cli.printer import Printer
from tolaria.core.events import Done, Event


class PrinterObserver(QuietObserver):
    def __init__(self, on_event: Callable[[Event], None], printer: Printer,
                 loop: asyncio.AbstractEventLoop) -> None:
        self._print = on_event
        self._printer = printer
        self._loop = loop
        #: The run's ``Done``, once it came.
        self.done: Done | None = None

    def event(self, event: Event) -> None:
        self._print(event)

    def agent_starting(self, stream_id: str) -> None:
        self._printer.attach(self._loop)
        self._printer.output.watch(self._loop)

    def run_finished(self, stream_id: str, done: Done) -> None:
        self.done = done
        self._print(done)
