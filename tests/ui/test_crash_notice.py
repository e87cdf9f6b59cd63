"""The window's process leaves crash reports (a Qt slot, the qasync loop, an exception that ends
the app) and the next start says so in the problems banner, once. See tolaria/support/crash.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from PySide6.QtWidgets import QLabel
from ui.uihelpers import StartApp

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-secret-123"

#: The real ``tolaria.app.main.run`` (hooks, qasync loop, shutdown), with a start that misbehaves:
#: a Qt slot raises, a loop callback raises, then start itself raises and ends the app.
CRASHING_GUI = textwrap.dedent("""\
    import asyncio, os, sys
    from PySide6.QtCore import QTimer
    from tolaria.app import main as app

    async def start(self):
        def slot():
            raise RuntimeError("slot saw " + os.environ["OPENAI_API_KEY"])
        QTimer.singleShot(0, slot)
        await asyncio.sleep(0.3)
        asyncio.get_running_loop().call_soon(lambda: 1 / 0)
        await asyncio.sleep(0.3)
        raise RuntimeError("start failed with " + os.environ["OPENAI_API_KEY"])

    app.Tolaria.start = start
    sys.exit(app.run())
""")


def _reports(home: Path) -> list[Path]:
    return sorted((home / "data" / "crash-reports").glob("crash-*.txt"))


def test_a_crashed_window_leaves_reports_and_the_next_start_says_so(start_app: StartApp, home: Path
                                                                    ) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    env.update(PYTHONPATH=str(ROOT), OPENAI_API_KEY=KEY, QT_QPA_PLATFORM="offscreen")
    crashed = subprocess.run([sys.executable, "-c", CRASHING_GUI], env=env, cwd=home,
                             capture_output=True, text=True, timeout=60, check=False)
    assert crashed.returncode == 1, crashed.stderr
    reports = _reports(home)
    texts = [p.read_text() for p in reports]
    assert len(reports) == 3, crashed.stderr
    assert all("process: gui (pid " in t for t in texts)
    assert "RuntimeError: slot saw ***" in texts[0] and "fatal: no" in texts[0]
    assert "where: event loop: Exception in callback" in texts[1]
    assert "ZeroDivisionError" in texts[1] and "fatal: no" in texts[1]
    assert "RuntimeError: start failed with ***" in texts[2] and "fatal: yes" in texts[2]
    for text in [*texts, crashed.stderr]:
        assert KEY not in text

    drv = start_app()
    problems = drv.window.findChild(QLabel, "settingsProblems")
    assert problems is not None and problems.isVisible()
    assert (f"Tolaria quit unexpectedly last time (3 reports); a report was saved at "
            f"{reports[-1]}") in problems.text()
    drv.close()
    again = start_app()
    problems = again.window.findChild(QLabel, "settingsProblems")
    assert problems is not None and "unexpectedly" not in problems.text()
