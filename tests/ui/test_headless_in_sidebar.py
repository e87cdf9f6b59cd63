"""A turn run with ``tolaria run`` (tolaria/headless_store.py) is in the window's sidebar at
the next start, with its transcript."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_headless_turn_shows_up_in_the_window(start_app, home: Path) -> None:  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    env.update(PYTHONPATH=str(ROOT))
    ran = subprocess.run([sys.executable, "-m", "tolaria", "run", "--agent", "demo",
                          "from the terminal"], env=env, cwd=home, capture_output=True,
                         text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
    drv = start_app()
    sidebar = drv.window.sidebar
    assert sidebar.ids() == [1]
    assert sidebar.list.item(0).text() == "from the terminal"
    assert drv.pane.conversation_id == 1  # the newest chat opens, with its stored turn
    [turn] = drv.app.store.turns(1)
    assert turn.status == "completed" and turn.prompt == "from the terminal"
