"""One tool call, as the best agent panels show it.

The header says what runs (``$ command``, or the file an edit tool changes), how long it has run
and how it ended; while it runs, the last lines of its output stream under the header. Expanding
it (in place: the transcript keeps what is above still) shows the whole output (unwrapped, with a
horizontal scroll), the diff of an edit, and, behind "Details", the raw input. The body is built
only when first expanded: a collapsed card is a handful of labels.
"""

from __future__ import annotations

import json
import re
import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from tolaria.core.events import summarize_tool_input as summarize_input  # re-exported
from tolaria.ui import theme
from tolaria.ui.transcript.cards.code import CodeText
from tolaria.ui.transcript.cards.diff import DiffHighlighter, edit_of
from tolaria.ui.transcript.cards.fold import Collapsible
from tolaria.ui.transcript.cards.style import Surface, bold_font, set_tone

#: Characters kept of a tool's output (the store keeps what its output cap allows).
MAX_OUTPUT = 64 * 1024
#: Output lines shown under a running tool's header.
TAIL_LINES = 4
_TAIL_LINE_CHARS = 160
#: Lines an expanded output or diff shows before it scrolls inside itself.
MAX_BOX_LINES = 24
_EXIT_RE = re.compile(r"(?i)\bexit(?:ed with)?(?: code|\s+status)?[: ]\s*(-?\d+)\b")

_TOOL_STATUS = {
    "pending": ("◌ waiting for approval", "muted"),
    "running": ("● running", "muted"),
    "done": ("✓ done", "success"),
    "failed": ("✗ failed", "error"),
    "cancelled": ("■ cancelled", "warning"),
    "interrupted": ("■ interrupted", "warning"),
    "unfinished": ("no result", "muted"),
}



def clip_tail(text: str, limit: int = MAX_OUTPUT) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def headline(value: object, limit: int = 160) -> str:
    """``$ command`` for a shell tool, the file path of an edit, else the summary."""
    if isinstance(value, dict):
        command = value.get("command", value.get("cmd"))
        if isinstance(command, list):
            command = " ".join(map(str, command))
        if isinstance(command, str) and command.strip():
            return "$ " + _one_line(command, limit)
    edit = edit_of(value)
    if edit is not None and edit[0]:
        return edit[0]
    return summarize_input(value, limit)


def tail_lines(output: str, count: int = TAIL_LINES) -> str:
    lines = [line for line in output[-8192:].splitlines() if line.strip()][-count:]
    return "\n".join(_one_line(line, _TAIL_LINE_CHARS) for line in lines)


def exit_code(output: str) -> int | None:
    found = _EXIT_RE.findall(output[-4096:])
    return int(found[-1]) if found else None


def format_elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s"


class ToolCard(Surface):
    """One tool call: what runs, its live tail and elapsed time, its status; all of it when
    expanded."""

    def __init__(self, tool_id: str, name: str, tool_input: object,
                 parent: QWidget | None = None, *, live: bool = True,
                 started: float | None = None) -> None:
        super().__init__("card", parent)
        self.setObjectName("toolCard")
        self.tool_id = tool_id
        self.status = "running"
        self.output = ""
        self.tool_input = tool_input
        self.is_error = False
        #: Monotonic start (a live call) for the elapsed time; None when restored. ``started``:
        #: when the call began, for a live card built again (a search jump and back).
        self.started = started if started is not None else time.monotonic() if live else None
        self.elapsed: float | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 10, 6)
        layout.setSpacing(2)
        self._fold = Collapsible(name or "tool", self)
        self._fold.toggle.setAccessibleName(f"Tool {name}: show details")
        self._fold.on_expanded = self._build_body  # type: ignore[method-assign]
        self._fold.toggle.setObjectName("toolName")
        self._fold.toggle.setFont(bold_font(self._fold.toggle))
        self._command = QLabel(headline(tool_input), self)
        self._command.setObjectName("toolCommand")
        self._command.setFont(theme.mono_font())
        self._command.setTextFormat(Qt.TextFormat.PlainText)
        self._command.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._elapsed = QLabel(self)
        self._elapsed.setObjectName("toolElapsed")
        set_tone(self._elapsed, "muted")
        self._status = QLabel(self)
        self._status.setObjectName("toolStatus")
        self._fold.header.addWidget(self._command, 1)
        self._fold.header.addWidget(self._elapsed)
        self._fold.header.addWidget(self._status)
        layout.addWidget(self._fold)
        self._tail = QLabel(self)
        self._tail.setObjectName("toolTail")
        set_tone(self._tail, "muted")
        self._tail.setFont(theme.mono_font())
        self._tail.setTextFormat(Qt.TextFormat.PlainText)
        self._tail.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._tail.setContentsMargins(18, 0, 0, 0)
        self._tail.hide()
        layout.addWidget(self._tail)
        self._output_box: CodeText | None = None
        self._diff_box: CodeText | None = None
        self._details: Collapsible | None = None
        self._input_box: CodeText | None = None
        self.set_status("running")
        edit = edit_of(tool_input)
        if edit is not None and edit[1].count("\n") < MAX_BOX_LINES:
            self.set_expanded(True)  # a small edit shows its diff at once, as Zed does

    # -- the body, built on first expand ------------------------------------------------------
    def _box(self, text: str, language: str | None = None) -> CodeText:
        box = CodeText(self._fold.body, language=language, max_lines=MAX_BOX_LINES)
        box.setObjectName("toolOutput")
        box.set_text(text)
        return box

    def _section(self, title: str) -> QLabel:
        label = QLabel(title, self._fold.body)
        set_tone(label, "muted")
        return label

    def _build_body(self) -> None:
        if self._output_box is not None:
            return
        body = self._fold.body_layout
        edit = edit_of(self.tool_input)
        if edit is not None:
            self._diff_box = self._box(edit[1])
            self._diff_box.setObjectName("toolDiff")
            self._diff_box.set_highlighter(DiffHighlighter(self._diff_box.document(), edit[0]))
            body.addWidget(self._diff_box)
        self._output_label = self._section("Output")
        body.addWidget(self._output_label)
        self._output_box = self._box(self.output or self._no_output())
        body.addWidget(self._output_box)
        self._details = Collapsible("Details", self._fold.body)
        self._details.on_expanded = self._build_details  # type: ignore[method-assign]
        self._details.expanded_changed.connect(self._fold.expanded_changed)
        body.addWidget(self._details, 0, Qt.AlignmentFlag.AlignLeft)

    def _build_details(self) -> None:
        if self._input_box is None and self._details is not None:
            self._input_box = CodeText(self._details.body, language="json",
                                       max_lines=MAX_BOX_LINES)
            self._input_box.set_text(self._input_json())
            self._details.body_layout.addWidget(self._input_box)

    def _input_json(self) -> str:
        if self.tool_input in (None, {}):
            return "(no input)"
        return json.dumps(self.tool_input, indent=2, ensure_ascii=False, default=str)

    def _no_output(self) -> str:
        return "(no output yet)" if self.status in ("running", "pending") else "(no output)"

    def _show_output(self) -> None:
        if self._output_box is not None:
            self._output_box.set_text(self.output or self._no_output())
        running = self.status in ("running", "pending")
        tail = tail_lines(self.output) if running else ""
        self._tail.setText(tail)
        self._tail.setVisible(bool(tail) and not self.expanded)

    # -- state ------------------------------------------------------------------------------------
    def set_status(self, status: str) -> None:
        self.status = status
        text, tone = _TOOL_STATUS.get(status, (status, "muted"))
        code = exit_code(self.output) if status in ("done", "failed") else None
        if code is not None and (code != 0 or status == "failed"):
            text += f" · exit {code}"
        self._status.setText(text)
        set_tone(self._status, tone)
        self._status.setAccessibleName(f"tool status: {text}")
        if status not in ("running", "pending"):
            if self.started is not None and self.elapsed is None:
                self.elapsed = time.monotonic() - self.started
            self._tail.hide()
        self.tick()

    def tick(self) -> None:
        """Show the elapsed time (the transcript's clock calls this while it runs)."""
        if self.started is None:
            return
        seconds = self.elapsed if self.elapsed is not None else time.monotonic() - self.started
        self._elapsed.setText(format_elapsed(seconds))

    def apply_update(self, name: str | None, tool_input: object, status: str | None,
                     output: str | None) -> None:
        """A live update of the running call (``ToolUpdate``): None means unchanged."""
        if name:
            self._fold.set_title(name)
            self._fold.toggle.setAccessibleName(f"Tool {name}: show details")
        if tool_input is not None:
            self.tool_input = tool_input
            self._command.setText(headline(tool_input))
            if self._input_box is not None:
                self._input_box.set_text(self._input_json())
        if status and self.status in ("pending", "running"):
            self.set_status(status)
        if output is not None and self.status in ("pending", "running"):
            self.output = clip_tail(output)
            self._show_output()

    @property
    def title(self) -> str:
        return self._fold.title

    @property
    def command(self) -> str:
        return self._command.text()

    @property
    def tail(self) -> str:
        return self._tail.text() if self._tail.isVisibleTo(self) else ""

    def finish(self, output: str, is_error: bool) -> None:
        self.output = clip_tail(output)
        self.is_error = is_error
        self.set_status("failed" if is_error else "done")
        self._show_output()

    @property
    def expanded(self) -> bool:
        return self._fold.expanded

    def set_expanded(self, on: bool) -> None:
        self._fold.set_expanded(on)
        self._tail.setVisible(bool(self._tail.text()) and not on
                              and self.status in ("running", "pending"))

    @property
    def fold(self) -> Collapsible:
        return self._fold

    def restyle(self) -> None:
        if self._diff_box is not None:
            self._diff_box.restyle()
