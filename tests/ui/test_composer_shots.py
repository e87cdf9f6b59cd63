"""Pictures of the @ picker and the / menu in the light and dark themes (``TOLARIA_DOCS_SHOTS=1``
writes them into docs/: composer-mentions[-dark].png, composer-slash[-dark].png)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, save_shot

from tolaria.ui import theme


def test_pictures_of_the_picker_and_the_menu(start_app: Callable[..., AppDriver], qtbot: QtBot,
                                             tmp_path: Path) -> None:
    folder = Path.cwd()
    subprocess.run(["git", "init", "-q"], check=True)
    for name in ("src/tolaria/ui/composer/assist.py", "src/tolaria/ui/composer/composer.py",
                 "src/tolaria/ui/composer/suggestions.py", "src/tolaria/chats/mentions/matcher.py",
                 "docs/composer.md", "tests/ui/test_composer.py", "README.md"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")
    commands = folder / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text("---\ndescription: Review the staged diff\n---\n")
    drv = start_app()
    drv.window.resize(1100, 720)
    pane = drv.pane
    pane.assist.set_context(str(folder), "claude", "Claude Code")
    try:
        for suffix, name in (("", "light"), ("-dark", "dark")):
            theme.apply_theme(name)
            qtbot.wait(50)
            pane.composer.clear()
            pane.composer.setFocus()
            QTest.keyClicks(pane.composer, "Tidy up @compo")
            qtbot.waitUntil(lambda: len(pane.assist.list.rows()) >= 3)
            shot = save_shot(drv.window, tmp_path, f"composer-mentions{suffix}.png")
            assert shot.is_file()
            pane.composer.clear()
            QTest.keyClicks(pane.composer, "/")
            qtbot.waitUntil(pane.assist.list.isVisible)
            save_shot(drv.window, tmp_path, f"composer-slash{suffix}.png")
            pane.composer.clear()
    finally:
        theme.apply_theme("light")
