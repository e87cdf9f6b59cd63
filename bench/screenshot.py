"""Take docs/screenshot.png: the real window running the built-in demo agent, offscreen.

    QT_QPA_PLATFORM=offscreen python bench/screenshot.py [--out docs/screenshot.png]

The current chat has finished one demo turn (thinking, a real shell tool, a markdown answer) and
is running a second one, whose tool is still at work (the button is Stop). The window is grabbed
with ``QWidget.grab()``, then closed the normal way, which stops the run.
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


async def shoot(out: Path, settings_out: Path | None = None) -> None:
    from tolaria.app.main import Tolaria

    app = Tolaria(cwd=str(ROOT))
    await app.start()
    try:
        window = app.window
        window.resize(1180, 860)
        older = window.current_pane()
        assert older is not None
        os.environ["TOLARIA_DEMO_TOOL_SECONDS"] = "0.2"
        older.composer.setPlainText("What does Stop do to a tool in its own session?")
        older.button.click()
        await until(lambda: older.running_stream is None)

        window.new_action.trigger()
        await until(lambda: window.current_pane() is not older)
        pane = window.current_pane()
        assert pane is not None
        os.environ["TOLARIA_DEMO_TOOL_SECONDS"] = "1.5"
        pane.composer.setPlainText("Show me a long shell command, then explain it")
        pane.button.click()
        await until(lambda: pane.running_stream is None)
        await until(lambda: not pane.transcript.busy)
        os.environ["TOLARIA_DEMO_TOOL_SECONDS"] = "120"
        pane.composer.setPlainText("Now run the whole test suite")
        pane.button.click()
        turn = pane.turn_views()[-1]
        await until(lambda: any(c.status == "running" for c in turn.tool_cards()))
        app.controller.rename(pane.conversation_id, "Long shell command demo")
        await asyncio.sleep(1.3)  # the spinner and elapsed time move on
        await until(lambda: not pane.transcript.busy)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not window.grab().save(str(out)):
            raise RuntimeError(f"could not write {out}")
        print(f"wrote {out}")
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
    args = parser.parse_args()
    from tolaria.app.main import make_qapplication
    from tolaria.qt import loop

    with tempfile.TemporaryDirectory(prefix="tolaria-shot-") as home:
        os.environ["TOLARIA_HOME"] = home
        os.environ.setdefault("TOLARIA_DEMO_DELAY", "0.002")
        make_qapplication()
        loop.run(shoot(args.out.resolve(), args.settings_out.resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
