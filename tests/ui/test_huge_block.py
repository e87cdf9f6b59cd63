"""Rendering a huge block of answer text stays bounded in time per frame and in what is held."""

from __future__ import annotations

import time

import pytest
from pytestqt.qtbot import QtBot

from tolaria.core.events import TextDelta
from tolaria.ui.transcript import blocks
from tolaria.ui.transcript.view import TranscriptView

SID = "ai-agent-stream-hugeblock01"
MB = 1024 * 1024

SHAPES = {
    "one line, no spaces": "x" * (4 * MB),
    "short lines": "word " * 10 + "\n" * 1 + ("a line of text\n" * (4 * MB // 15)),
    "unclosed code fence": "```python\n" + "def f(x): return x  # comment\n" * (4 * MB // 30),
    "nested quotes and lists": ("> " * 40 + "- item *em* **strong** `code`\n") * (4 * MB // 140),
    "a table": "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * (4 * MB // 10),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_one_huge_delta_is_shown_a_bounded_piece_per_frame(qtbot: QtBot, shape: str) -> None:
    """The work of one frame is bounded by construction, whatever the machine's speed: the
    delta is only queued (nothing rendered), and a frame whose budget is already spent still
    renders at most one chunk. The milliseconds this costs are printed here (``-s``) and are
    a benchmark's business (docs/RELIABILITY.md, section 6), not an assertion's."""
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(900, 600)
    view.show()
    turn = view.add_turn("flood", "agent", SID)
    text = SHAPES[shape]
    started = time.perf_counter()
    turn.enqueue(TextDelta(SID, text=text))  # one 4 MB delta: what one pipe read can bring
    enqueue_s = time.perf_counter() - started
    assert turn.text() == "", "queueing a delta renders nothing"
    queued = turn.queue.pending_chars
    assert 0 < queued <= len(text)
    frames = []
    while turn.busy:
        before = turn.queue.pending_chars
        began = time.perf_counter()
        turn.drain(0.0)  # a frame whose budget is already spent
        frames.append(time.perf_counter() - began)
        assert before - turn.queue.pending_chars <= blocks.CHUNK_CHARS, "one chunk a frame"
        assert len(frames) < 2000
    assert len(frames) >= queued // blocks.CHUNK_CHARS
    shown = turn.text()
    assert len(shown) <= blocks.CHUNK_CHARS * (blocks.MAX_CHUNKS + 1)
    assert shown.rstrip().splitlines()[-1][-50:] in text[-10_000:], "the newest text is shown"
    print(f"{shape}: {len(frames)} frames, worst {max(frames) * 1000:.1f} ms, "
          f"median {sorted(frames)[len(frames) // 2] * 1000:.1f} ms, enqueue "
          f"{enqueue_s * 1000:.1f} ms")
