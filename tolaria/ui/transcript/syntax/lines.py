"""Pygments tokens cut into lines, lexed only as far as asked and resumed where text grew.

Pygments lexes a whole text from its start. A code block of 2,000 lines costs tens of
milliseconds to lex (far more than a frame), so ``LineTokens`` keeps the lexer's generator
paused and pulls tokens only up to the line someone asked for (the lines on screen), within a
time budget. When a streaming block grows (the new text starts with the old), lexing restarts
at the last line that could change, in the lexer state saved at the start of that line: a
``RegexLexer`` (most of Pygments' lexers) takes its state stack as an argument, and the stack
at a line's start is read from the paused generator when a match begins exactly there. Other
lexers restart from the top (still only as far as asked).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, cast

from pygments.lexer import Lexer, RegexLexer
from pygments.token import Error, _TokenType, is_token_subtype

#: (column, length, token type) of one coloured span of a line.
Span = tuple[int, int, _TokenType]
#: (offset in the lexed text, token type, text) as Pygments yields them.
Token = tuple[int, _TokenType, str]
#: (line index, offset of its start in the text, the lexer's state stack there).
Checkpoint = tuple[int, int, tuple[str, ...] | None]
#: Lines before the changed one lexed again when one of them had an error token: a construct
#: still open at the end (``/* ...`` where the lexer's one regex wants the ``*/``) lexes as an
#: error until more text comes.
RESCAN_LINES = 64


class LineTokens:
    """The tokens of ``text``'s lines (split at ``\\n``), lexed on demand."""

    def __init__(self, lexer: Lexer, text: str = "") -> None:
        self.lexer = lexer
        self._resumable = isinstance(lexer, RegexLexer) and type(lexer).get_tokens_unprocessed \
            is RegexLexer.get_tokens_unprocessed
        self.text = ""
        self._starts: list[int] = [0]
        #: Spans of each fully lexed line, in order (``len`` is how many lines are done).
        self.lines: list[list[Span]] = []
        self._checkpoints: list[Checkpoint] = [(0, 0, None)]
        #: Lines lexed since this object was made (what a test or a benchmark counts).
        self.lexed_count = 0
        self._tokens: Iterator[Token] | None = None
        self._base = 0  # offset in ``text`` of the running generator's text
        self._pending: list[Span] = []
        #: The first line with an error token (None: none).
        self._first_error: int | None = None
        self.set_text(text)

    # -- the text ------------------------------------------------------------------------------
    def set_text(self, text: str) -> None:
        """Take the block's new text; keep what is still valid when it only grew at its end."""
        old = self.text
        if text == old:
            return
        grew = bool(old) and text.startswith(old)
        self.text = text
        if grew:
            first_new = len(self._starts) - 1  # the old last line may go on in the new text
            if self._first_error is not None and \
                    first_new - RESCAN_LINES <= self._first_error < first_new:
                first_new = self._first_error
            at = len(old)
            while (at := text.find("\n", at)) >= 0:
                at += 1
                self._starts.append(at)
            self._restart(first_new)
        else:
            self._starts = [0]
            at = 0
            while (at := text.find("\n", at)) >= 0:
                at += 1
                self._starts.append(at)
            self._checkpoints = [(0, 0, None)]
            self._restart(0)

    @property
    def line_count(self) -> int:
        return len(self._starts)

    def line_text(self, index: int) -> str:
        start = self._starts[index]
        end = self._starts[index + 1] - 1 if index + 1 < len(self._starts) else len(self.text)
        return self.text[start:end]

    def _restart(self, line: int) -> None:
        """Drop what was lexed from ``line`` on and resume at the last checkpoint before it."""
        while self._checkpoints and self._checkpoints[-1][0] > line:
            self._checkpoints.pop()
        at_line, offset, stack = self._checkpoints[-1] if self._checkpoints else (0, 0, None)
        del self.lines[at_line:]
        if self._first_error is not None and self._first_error >= at_line:
            self._first_error = None
        self._pending = []
        self._base = offset
        # Pygments' own preprocessing would strip newlines; lex the text as it is, ending in one.
        rest = self.text[offset:] + "\n"
        if stack is not None and self._resumable:
            # (A RegexLexer's takes the state stack to start in; typed so with or without stubs.)
            resume = cast("Callable[[str, tuple[str, ...]], Iterator[Token]]",
                          self.lexer.get_tokens_unprocessed)
            self._tokens = resume(rest, stack)
        else:
            self._tokens = self.lexer.get_tokens_unprocessed(rest)

    # -- lexing ------------------------------------------------------------------------------------
    @property
    def done(self) -> int:
        """How many lines, from the first, are lexed."""
        return len(self.lines)

    def ensure(self, line: int, deadline: float | None = None) -> bool:
        """Lex up to ``line`` (included); stop at ``deadline`` (``time.perf_counter``). True
        when it is lexed."""
        last = min(line, len(self._starts) - 1)
        count = 0
        while len(self.lines) <= last:
            if not self._step():
                break
            count += 1
            if deadline is not None and count % 16 == 0 and time.perf_counter() > deadline:
                break
        return len(self.lines) > last

    def _step(self) -> bool:
        """Take one token; False when there are none left."""
        if self._tokens is None:
            return False
        try:
            index, ttype, value = next(self._tokens)
        except StopIteration:
            self._tokens = None
            self._finish()
            return False
        start = self._base + index
        line = len(self.lines)
        if self._resumable and line < len(self._starts) and start == self._starts[line] \
                and line > self._checkpoints[-1][0]:
            self._checkpoint(line, start)
        self._add(start, ttype, value)
        return True

    def _checkpoint(self, line: int, start: int) -> None:
        frame: Any = getattr(self._tokens, "gi_frame", None)
        if frame is None:
            return
        names = frame.f_locals
        # The generator is paused inside the match that begins here: its stack is the state
        # in which this line starts (only when the match itself begins at the line's start).
        if names.get("pos", -1) + self._base == start and isinstance(names.get("statestack"),
                                                                      list):
            self._checkpoints.append((line, start, tuple(names["statestack"])))

    def _add(self, start: int, ttype: _TokenType, value: str) -> None:
        if self._first_error is None and is_token_subtype(ttype, Error):
            self._first_error = len(self.lines)
        while value:
            line = len(self.lines)
            if line >= len(self._starts):
                return  # the "\n" added at the end of the text
            column = start - self._starts[line]
            cut = value.find("\n")
            piece = value if cut < 0 else value[:cut]
            if piece:
                pending = self._pending
                if pending and pending[-1][2] is ttype and sum(pending[-1][:2]) == column:
                    pending[-1] = (pending[-1][0], pending[-1][1] + len(piece), ttype)
                else:
                    pending.append((column, len(piece), ttype))
            if cut < 0:
                return
            self._close_line()
            start += cut + 1
            value = value[cut + 1:]

    def _close_line(self) -> None:
        self.lines.append(self._pending)
        self._pending = []
        self.lexed_count += 1

    def _finish(self) -> None:
        while len(self.lines) < len(self._starts):
            self._close_line()
