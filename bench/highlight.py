"""The cost of colouring code: a 2,000-line block's build, first paint and per-screen colouring
against one frame (16 ms), and a streaming block's per-delta cost.

    QT_QPA_PLATFORM=offscreen python bench/highlight.py [--lines 2000] [--repeat 5]

A code block (``tolaria.ui.transcript.cards.code.CodeText``, the widget of the transcript's
code blocks) sits in a 900x600 scroll area, as in the transcript (it is as tall as its lines; the
area scrolls). The code is a real Python file of this checkout repeated up to ``--lines`` lines.
Each figure is measured with the highlighter (``language="python"``) and without one (plain
text, the cost Qt has anyway); the median of ``--repeat`` runs:

- *build*: ``set_text`` of the whole block (the document, and the highlighter's no-op passes);
- *first paint*: ``repaint()`` of the viewport at the top (lexing the lines on screen);
- *screens*: scrolled down one screen at a time, each ``repaint()`` timed (the highlighter
  lexes that screen's lines: the ones above were lexed by the screens before);
- *whole lex*: Pygments lexing the whole block at once (what an eager highlighter would pay
  on the first paint);
- *stream*: a block growing to ``--lines`` lines one line per delta (two deltas per line, one
  ending mid-line), each ``set_text`` + ``repaint()`` timed at the bottom of the block.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication, QScrollArea  # noqa: E402

from tolaria.ui.transcript.cards.code import CodeText  # noqa: E402

FRAME_MS = 16.0


def sample_code(lines: int) -> str:
    source = (ROOT / "tolaria" / "ui" / "transcript" / "view.py").read_text().splitlines()
    out = [source[n % len(source)] for n in range(lines)]
    return "\n".join(out)


def ms(seconds: float) -> float:
    return seconds * 1000


def code_view(language: str | None) -> tuple[QApplication, QScrollArea, CodeText]:
    """An empty code block in a 900x600 scroll area, shown."""
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    area = QScrollArea()
    area.resize(900, 600)
    text = CodeText(language=language)
    area.setWidget(text)
    area.setWidgetResizable(True)
    area.show()
    app.processEvents()
    return app, area, text


def run_once(code: str, language: str | None) -> dict[str, object]:
    from pygments.lexers import get_lexer_by_name
    app, area, text = code_view(language)
    started = time.perf_counter()
    text.set_text(code)
    build = time.perf_counter() - started
    app.processEvents()  # the layout settles (Qt's own work, the same for both)
    viewport = text.viewport()
    started = time.perf_counter()
    viewport.repaint()
    first = time.perf_counter() - started
    lexed = text.highlighter.tokens.lexed_count if text.highlighter and \
        text.highlighter.tokens else 0
    screens: list[float] = []
    bar = area.verticalScrollBar()
    step = area.viewport().height()
    value = 0
    while value < bar.maximum():
        value = min(bar.maximum(), value + step)
        bar.setValue(value)
        started = time.perf_counter()
        viewport.repaint()
        screens.append(time.perf_counter() - started)
        app.processEvents()  # the loop turns between frames (the lexing goes on there)
    area.close()
    area.deleteLater()
    app.processEvents()
    whole = 0.0
    if language is not None:
        lexer = get_lexer_by_name(language)
        started = time.perf_counter()
        for _ in lexer.get_tokens_unprocessed(code):
            pass
        whole = time.perf_counter() - started
    return {"build": build, "first": first, "screens": screens, "whole": whole,
            "lexed": lexed}


def stream_once(code: str, language: str | None) -> list[float]:
    app, area, text = code_view(language)
    times: list[float] = []
    lines = code.split("\n")
    shown = ""
    bar = area.verticalScrollBar()
    for line in lines:
        for piece in (line[: len(line) // 2], line[len(line) // 2:] + "\n"):
            shown += piece
            started = time.perf_counter()
            text.set_text(shown)
            bar.setValue(bar.maximum())
            text.viewport().repaint()
            times.append(time.perf_counter() - started)
    area.close()
    area.deleteLater()
    app.processEvents()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from pygments import __version__ as pygments
    from PySide6 import __version__ as pyside

    from tolaria.ui import theme

    app = QApplication(sys.argv)
    theme.apply_theme("light")
    code = sample_code(args.lines)
    print(f"Python {platform.python_version()}, PySide6 {pyside}, Pygments {pygments}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; {args.lines} lines, "
          f"{len(code) // 1024} KB")
    run_once(code, "python")  # warm-up: imports, the lexer's module, fonts
    results: dict[str | None, list[dict[str, object]]] = {"python": [], None: []}
    for _ in range(args.repeat):  # interleaved: a load change on the machine hits both alike
        for language in ("python", None):
            results[language].append(run_once(code, language))
    for language in ("python", None):
        runs = results[language]
        label = "highlighted" if language else "plain"
        build = statistics.median(ms(float(r["build"])) for r in runs)  # type: ignore[arg-type]
        first = statistics.median(ms(float(r["first"])) for r in runs)  # type: ignore[arg-type]
        screens = sorted(ms(s) for r in runs for s in r["screens"])  # type: ignore[attr-defined]
        over = sum(1 for s in screens if s > FRAME_MS)
        print(f"{label:12} build {build:6.1f} ms | first paint {first:5.1f} ms | per screen "
              f"median {statistics.median(screens):5.1f} ms, p95 "
              f"{screens[int(len(screens) * 0.95)]:5.1f} ms, worst {screens[-1]:5.1f} ms, "
              f"{over}/{len(screens)} over {FRAME_MS:.0f} ms | lines lexed after the first "
              f"paint {runs[0]['lexed'] if language else '-'}")
        if language:
            whole = statistics.median(ms(float(r["whole"])) for r in runs)  # type: ignore[arg-type]
            print(f"{'':12} whole block lexed at once (an eager highlighter): {whole:.1f} ms")
    stream_code = sample_code(min(args.lines, 600))
    streams: dict[str | None, list[float]] = {"python": [], None: []}
    for _ in range(2):
        for language in ("python", None):
            streams[language] += stream_once(stream_code, language)
    for language in ("python", None):
        times = sorted(ms(t) for t in streams[language])
        label = "highlighted" if language else "plain"
        print(f"{label:12} stream {len(times) // 2} deltas (x2) to {stream_code.count(chr(10)) + 1} lines: "
              f"median {statistics.median(times):5.2f} ms, p95 "
              f"{times[int(len(times) * 0.95)]:5.2f} ms, worst {times[-1]:5.1f} ms")
    app.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
