"""The window's "Import sessions from" a host over real ssh, run as the non-root local user by
tests/remote/test_remote_import_window.py (``TOLARIA_IMPORT_CASE``: a JSON file; not collected
on its own: the name does not start with ``test_``).

The real window (offscreen) imports from the case's host, typed as "Other host…" under the New
chat button; ssh's host-key question is answered Yes in its dialog; then the session on the host
gets a half-written last line (the CLI still writing it) and the window imports again. What it
saw goes to the case's ``out`` file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, save_shot

from tolaria.ui import theme

CASE = os.environ.get("TOLARIA_IMPORT_CASE", "")
pytestmark = pytest.mark.skipif(not CASE, reason="run by tests/remote/test_remote_import_window.py")


def test_case(start_app: Callable[..., AppDriver], qtbot: QtBot, home: Path) -> None:
    cfg = json.loads(Path(CASE).read_text())
    (home / "settings.toml").write_text(f'[remote]\nssh_config = "{cfg["ssh_config"]}"\n')
    drv = start_app()
    if cfg.get("mode") == "cancel":
        _cancel_while_ssh_asks(drv, qtbot, cfg)
        return
    window, bar = drv.window, drv.window.import_report
    router = window.ssh_questions
    before = set(window.sidebar.ids())
    window.import_from_menu.ask_other()
    entry = window.sidebar.new_host_entry
    assert entry.isVisible() and entry.label.text() == "Import sessions from:"
    QTest.keyClicks(entry.edit, cfg["host"])
    QTest.keyClick(entry.edit, Qt.Key.Key_Return)
    assert bar.running and bar.headline.text().startswith(f"Looking on {cfg['host']}")
    qtbot.waitUntil(lambda: router.dialog is not None and router.dialog.isVisible(),
                    timeout=40_000)
    assert router.dialog is not None
    questions = router.dialog.questions
    card = next(iter(questions.cards.values()))
    asked = card.prompt.text()
    shots = Path(cfg["shots"]) if cfg.get("shots") else None
    if shots is not None:
        _shots(drv, qtbot, shots, "import-from-host-asks")
    QTest.mouseClick(card.yes, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not bar.running, timeout=60_000)
    first = bar.headline.text()
    if shots is not None:
        _shots(drv, qtbot, shots, "import-from-host-done")
    new = sorted(set(window.sidebar.ids()) - before)
    chats = [[c.id, c.host, c.agent, len(drv.app.store.turns(c.id))]
             for c in (drv.stored_conversation(i) for i in new)]
    # The session changes on the host before the next import: a line still being written.
    with open(cfg["session"], "a") as fh:
        fh.write('{"parentUuid":"x","type":"user","message":{"role":"user","cont')
    window.import_from_menu.import_from_requested.emit(cfg["host"])  # the menu's recent host
    qtbot.waitUntil(lambda: not bar.running, timeout=60_000)
    out: dict[str, Any] = {
        "asked": asked, "first": first, "chats": chats, "second": bar.headline.text(),
        "after": [[i, len(drv.app.store.turns(i))] for i in sorted(set(window.sidebar.ids())
                                                                    - before)]}
    Path(cfg["out"]).write_text(json.dumps(out))


def _shots(drv: AppDriver, qtbot: QtBot, where: Path, name: str) -> None:
    for look in ("light", "dark"):
        theme.apply_theme(look)
        drv.window.resize(1000, 620)
        qtbot.wait(150)  # the palette change reaches every widget
        save_shot(drv.window, where, f"{name}-{look}.png")
    theme.apply_theme("light")


def _cancel_while_ssh_asks(drv: AppDriver, qtbot: QtBot, cfg: dict[str, Any]) -> None:
    """Cancel while ssh's host-key question is open: ssh killed, its question gone with it,
    no askpass helper left, nothing imported."""
    window, bar = drv.window, drv.window.import_report
    router = window.ssh_questions
    before = set(window.sidebar.ids())
    window.import_from_menu.import_from_requested.emit(cfg["host"])
    qtbot.waitUntil(lambda: router.dialog is not None and router.dialog.isVisible(),
                    timeout=40_000)
    assert router.dialog is not None
    questions = router.dialog.questions
    bar.cancel_button.click()
    qtbot.waitUntil(lambda: not bar.running, timeout=10_000)
    qtbot.waitUntil(lambda: not questions.cards, timeout=20_000)
    helpers = [p.pid for p in psutil.process_iter(["cmdline"])
               if "tolaria.core.remote.askpass" in " ".join(p.info["cmdline"] or [])]
    Path(cfg["out"]).write_text(json.dumps({
        "headline": bar.headline.text(), "helpers": helpers,
        "new_chats": sorted(set(window.sidebar.ids()) - before),
        "dialog_shown": router.dialog.isVisible()}))
