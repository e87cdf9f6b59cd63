"""The pictures of the HTML export: docs/export.png (light) and docs/export-dark.png (dark).

    python bench/export_shots.py [--out docs]

A chat is written through the real ``Store`` in a throwaway ``TOLARIA_HOME`` (an answer with a
heading, a list, a table and a Python block, a shell call, a small edit, a turn that failed with
a hint, a turn stopped with its tool cut short), exported with ``tolaria export``, and rendered
by Chromium headless (Debian's ``chromium`` package: ``apt-get install chromium``) at 1200x1600,
once as the system's light scheme and once forced dark. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ANSWER = """The parser loops on a lone `<` because `read_token` never advances. Three changes:

1. `read_token` raises **ParseError** with the column;
2. the parser stops at the first unexpected token;
3. tests for the empty input and a lone `<`.

| input | before | after |
|---|---|---|
| empty | crash | `[]` |
| `<` | hangs | error at 1:1 |

```python
def read_token(text: str, pos: int) -> Token:
    start = pos
    while pos < len(text) and text[pos].isalnum():
        pos += 1
    if pos == start:
        raise ParseError(f"unexpected {text[pos]!r}", start)
    return Token(text[start:pos], start)
```
"""


def fill() -> None:
    from tolaria.core.events import (
        Done,
        Error,
        TextDelta,
        ThinkingDelta,
        ToolDone,
        ToolStart,
        Usage,
    )
    from tolaria.core.store.db import Store

    store = Store()
    chat = store.create_conversation("Parser hangs on a lone <", "claude", "/home/ana/parser")
    sid = "ai-agent-stream-shot0001"
    store.start_turn(chat.id, sid, "claude", "The parser hangs on input `<`. Find out why and "
                                             "fix it, with tests.")
    store.append_event(ThinkingDelta(sid, text="A loop that does not advance, probably in the "
                                                "tokenizer. Run the tests first."))
    store.append_event(ToolStart(sid, tool_id="b1", name="Bash",
                                 input={"command": "pytest tests/test_parser.py -q"}))
    store.append_event(ToolDone(sid, tool_id="b1", output="....F\nFAILED tests/test_parser.py::"
                                "test_lone_lt - Timeout\n1 failed, 4 passed in 5.02s\n"))
    store.append_event(ToolStart(sid, tool_id="e1", name="Edit", input={
        "file_path": "src/parser/tokens.py",
        "old_string": "    while text[pos].isalnum():\n        pos += 1\n    return text[start:pos]\n",
        "new_string": "    while pos < len(text) and text[pos].isalnum():\n        pos += 1\n"
                      "    if pos == start:\n        raise ParseError(text, start)\n"
                      "    return text[start:pos]\n"}))
    store.append_event(ToolDone(sid, tool_id="e1", output="The file was updated."))
    store.append_event(TextDelta(sid, text=ANSWER))
    store.append_event(Usage(sid, input_tokens=18_240, output_tokens=912, cost_usd=0.0411))
    store.append_event(Done(sid, stop_reason="end_turn", duration_ms=21_400))
    sid = "ai-agent-stream-shot0002"
    store.start_turn(chat.id, sid, "claude", "Now run the whole suite")
    store.append_event(Error(sid, message="API Error: 529 Overloaded", category="overloaded",
                             hint="Claude's servers are overloaded: try again in a minute."))
    store.append_event(Done(sid, stop_reason="error", duration_ms=3_100))
    sid = "ai-agent-stream-shot0003"
    store.start_turn(chat.id, sid, "claude", "Try again, and run the slow tests too")
    store.append_event(TextDelta(sid, text="Running the full suite, slow tests included."))
    store.append_event(ToolStart(sid, tool_id="b2", name="Bash",
                                 input={"command": "pytest -q --runslow"}))
    store.append_event(Done(sid, stop_reason="cancelled", duration_ms=48_000))
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "docs"))
    parser.add_argument("--fill", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        fill()
        return
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("needs Chromium: apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="tolaria-export-shots-") as tmp:
        env = {**os.environ, "TOLARIA_HOME": str(Path(tmp) / "home"), "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, __file__, "--fill"], env=env, check=True)
        page = Path(tmp) / "chat.html"
        subprocess.run([sys.executable, "-m", "tolaria", "export", "1", "-o", str(page)],
                       env=env, check=True)
        for name, extra in (("export.png", []), ("export-dark.png", ["--force-dark-mode"])):
            subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                            "--hide-scrollbars", *extra, f"--screenshot={Path(args.out) / name}",
                            "--window-size=1200,1600", page.as_uri()],
                           check=True, capture_output=True, timeout=120)
            print(Path(args.out) / name)


if __name__ == "__main__":
    main()
