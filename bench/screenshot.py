"""Take the README's pictures: the real window running the built-in demo agent, offscreen.

    QT_QPA_PLATFORM=offscreen python bench/screenshot.py [--out docs/screenshot.png]

The current chat holds one stored turn of a coding agent (an edit shown as a diff, a code block
with a line longer than the pane) and is running a demo turn, whose shell tool is still at work
(the button is Stop) and shows the last lines of its output. A close-up of the stored turn (its
coloured code, diff and console output) goes to ``--highlight-out``. It is grabbed in the light theme (``--out``) and the dark one
(``screenshot-dark.png`` next to it), then the Preferences window (``--settings-out``). The
window is grabbed with ``QWidget.grab()``, then closed the normal way, which stops the run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def agent_folder() -> Path:
    """The agents' folder in the pictures: a plain folder in the throwaway home, never this
    checkout (every turn there would snapshot the checkout into checkpoints, and the header
    would show the branch folder's name)."""
    folder = Path(os.environ["TOLARIA_HOME"]) / "project"
    folder.mkdir(exist_ok=True)
    return folder


def save(pixmap, out: Path) -> None:  # type: ignore[no-untyped-def]
    if not pixmap.save(str(out)):
        raise RuntimeError(f"could not write {out}")
    print(f"wrote {out}")


def shots_main(description: str, shoot, prepare=None) -> int:  # type: ignore[no-untyped-def]
    """``main`` of a script that takes docs pictures of the real window: ``--out-dir`` (docs/),
    a throwaway ``TOLARIA_HOME`` with an empty ``adapters/`` folder that ``prepare(home)`` may
    fill (agents, stored chats), then ``shoot(out_dir)`` runs on the app's event loop."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    from tolaria.app.main import make_qapplication
    from tolaria.qt import loop

    with tempfile.TemporaryDirectory(prefix="tolaria-shots-") as home:
        os.environ["TOLARIA_HOME"] = home
        os.environ.setdefault("TOLARIA_DEMO_DELAY", "0.002")
        (Path(home) / "adapters").mkdir()
        if prepare is not None:
            prepare(Path(home))
        make_qapplication()
        out_dir = args.out_dir.resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        loop.run(shoot(out_dir))
    return 0


async def until(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("the demo did not get there in time")
        await asyncio.sleep(0.05)


async def shoot_settings(app, out: Path) -> None:  # type: ignore[no-untyped-def]
    """The Preferences window (Agents page, the demo agent selected, its Test run)."""
    from PySide6.QtWidgets import QPushButton

    from tolaria.ui.settings import SettingsDialog

    app.window.preferences_action.trigger()
    dialog = app.window.findChild(SettingsDialog, "settingsDialog")
    assert dialog is not None
    dialog.resize(900, 660)
    dialog.tabs.setCurrentIndex(0)
    await asyncio.sleep(2.0)  # detection of every agent runs in the background
    test = dialog.findChild(QPushButton, "agentTestButton")
    if test is not None and test.isEnabled():
        os.environ["TOLARIA_DEMO_TOOL_SECONDS"] = "0.2"  # the Test's tiny turn runs the demo too
        test.click()
        await asyncio.sleep(0.2)
        await until(lambda: test.text() == "Test", timeout=60)
    if not dialog.grab().save(str(out)):
        raise RuntimeError(f"could not write {out}")
    print(f"wrote {out}")
    dialog.close()


EDIT = {"file_path": "tolaria/core/linereader.py",
        "old_string": "    limit = 64 * 1024\n    return reader.readline()\n",
        "new_string": "    limit = 16 * 1024 * 1024  # agents print multi-MB JSON lines\n"
                      "    return await reader.readuntil(b\"\\n\")\n"}
ANSWER = """I raised the line limit: Claude prints whole tool results as one JSON line.

```python
async def read_line(reader: asyncio.StreamReader, limit: int = 16 * 1024 * 1024) -> bytes:
    return await reader.readuntil(b"\\n")  # a line longer than `limit` becomes a Diagnostic event (the reader goes on), never a crash of the whole run
```

The tests pass with a 40 MB line:

```console
$ pytest -q tests/core/test_linereader.py
12 passed in 0.84s
```
"""


def stored_turn(cwd: str) -> None:
    """A finished turn of a coding agent, written to the store as the app would."""
    from tolaria.core.events import STOP_END_TURN, Done, TextDelta, ToolDone, ToolStart
    from tolaria.core.store.db import Store
    from tolaria.core.stream_id import new_stream_id

    store = Store()
    try:
        chat = store.create_conversation("Read multi-MB lines", "demo", cwd)
        sid = new_stream_id()
        store.start_turn(chat.id, sid, "demo", "Why does a long tool result crash the reader?")
        store.append_event(TextDelta(sid, text="The reader's line limit is 64 KB. Fixing it:"))
        store.append_event(ToolStart(sid, tool_id="e1", name="Edit", input=EDIT))
        store.append_event(ToolDone(sid, tool_id="e1", output="The file has been updated."))
        store.append_event(TextDelta(sid, text="\n\n" + ANSWER))
        store.append_event(Done(sid, stop_reason=STOP_END_TURN, duration_ms=8400))
    finally:
        store.close()


async def shoot(out: Path, settings_out: Path | None = None,
                highlight_out: Path | None = None) -> None:
    from tolaria.app.main import Tolaria

    stored_turn(str(agent_folder()))
    app = Tolaria(cwd=str(agent_folder()))
    await app.start()
    try:
        window = app.window
        window.resize(1180, 860)
        window.view_menu.set_current("light")
        [chat] = [c for c in app.controller.conversations() if c.title == "Read multi-MB lines"]
        window.open_conversation(chat.id)
        pane = window.current_pane()
        assert pane is not None and pane.conversation_id == chat.id
        await until(lambda: bool(pane.turn_views()) and not pane.transcript.busy)
        if highlight_out is not None:  # a close-up of the stored turn: code, diff, console
            stored = pane.turn_views()[0]
            stored.body.grab()  # paints (and so colours) lines the window did not show
            await asyncio.sleep(0.5)
            save(stored.body.grab(), highlight_out)
        os.environ["TOLARIA_DEMO_TOOL_SECONDS"] = "120"
        pane.composer.setPlainText("Now run the whole test suite")
        pane.button.click()
        turn = pane.turn_views()[-1]
        await until(lambda: any(c.status == "running" for c in turn.tool_cards()))
        await until(lambda: any(c.tail for c in turn.tool_cards()))  # its live output tail
        await asyncio.sleep(2.3)  # the elapsed time moves on
        await until(lambda: not pane.transcript.busy)
        out.parent.mkdir(parents=True, exist_ok=True)
        dark = out.with_name(out.stem + "-dark" + out.suffix)
        for name, path in (("light", out), ("dark", dark)):
            window.view_menu.set_current(name)
            await asyncio.sleep(0.3)
            if not window.grab().save(str(path)):
                raise RuntimeError(f"could not write {path}")
            print(f"wrote {path}")
        window.view_menu.set_current("light")
        if settings_out is not None:
            await shoot_settings(app, settings_out)
    finally:
        app.window.force_close()
        await app.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshot.png")
    parser.add_argument("--settings-out", type=Path, default=ROOT / "docs" / "settings.png",
                        help="where the Preferences window's picture goes")
    parser.add_argument("--highlight-out", type=Path, default=ROOT / "docs" / "highlight.png",
                        help="where the close-up of the stored turn's code goes")
    args = parser.parse_args()
    from tolaria.app.main import make_qapplication
    from tolaria.qt import loop

    with tempfile.TemporaryDirectory(prefix="tolaria-shot-") as home:
        os.environ["TOLARIA_HOME"] = home
        os.environ.setdefault("TOLARIA_DEMO_DELAY", "0.002")
        make_qapplication()
        loop.run(shoot(args.out.resolve(), args.settings_out.resolve(),
                       args.highlight_out.resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
