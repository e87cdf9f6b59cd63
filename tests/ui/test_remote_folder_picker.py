"""The working-folder picker of a chat on a host (issue 25.6), real widgets offscreen: it lists
the host's folders (a command target, ``env``: the same code path as ssh, no sshd needed; the
ssh one is tests/remote/test_remote_folders.py), opens a folder, goes up, marks git folders, and
refuses a bad typed path with its one line while the last listing stays. Pictures light and
dark (``TOLARIA_DOCS_SHOTS=1``: docs/remote-folders[-dark].png)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import save_shot

from tolaria.qt.remote_folders import FolderLister
from tolaria.ui import theme
from tolaria.ui.chat.remote_folders import RemoteFolderDialog


@pytest.fixture
def box(home: Path, tmp_path: Path) -> str:
    (home / "settings.toml").write_text(f'[hosts."box"]\ncommand = "env"\npython = '
                                        f'"{sys.executable}"\n')
    return "box"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    top = tmp_path / "srv"
    for name in ("api", "web", "notes", ".cache"):
        (top / name).mkdir(parents=True)
    (top / "README.md").write_text("not a folder\n")
    subprocess.run(["git", "init", "-q", str(top / "api")], check=True)
    return top


def opened(qtbot: QtBot, box: str, start: str) -> RemoteFolderDialog:
    dialog = RemoteFolderDialog(box, start)
    qtbot.addWidget(dialog)
    lister = FolderLister(box, dialog)
    dialog.listing_requested.connect(lister.request)
    dialog.lister = lister  # type: ignore[attr-defined]  # kept alive with the dialog
    dialog.start()
    return dialog


def wait_listed(qtbot: QtBot, dialog: RemoteFolderDialog, path: str) -> None:
    qtbot.waitUntil(lambda: dialog.shown is not None and dialog.shown.path == path
                    and dialog.choose.isEnabled(), timeout=20_000)


def test_the_picker_browses_the_hosts_folders_and_chooses_one(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, box: str, tree: Path,
        tmp_path: Path) -> None:
    dialog = opened(qtbot, box, str(tree))
    wait_listed(qtbot, dialog, str(tree))
    shown = [dialog.folders.item(i).text() for i in range(dialog.folders.count())]
    assert shown == ["api  · git", "notes", "web", ".cache"], "folders only, git marked"
    assert "4 folders" in dialog.status.text()
    save_shot(dialog, tmp_path, "remote-folders.png")
    # Into a folder (activated), then Up.
    item = dialog.folders.item(2)
    dialog.folders.itemActivated.emit(item)
    wait_listed(qtbot, dialog, str(tree / "web"))
    assert dialog.folders.count() == 0 and dialog.up.isEnabled()
    dialog.up.click()
    wait_listed(qtbot, dialog, str(tree))
    with qtbot.waitSignal(dialog.folder_chosen) as chosen:
        dialog.choose.click()
    assert chosen.args == [str(tree)]


@pytest.mark.parametrize(("typed", "said"), [
    ("nowhere", "no such folder: {tree}/nowhere on box"),
    ("README.md", "not a folder: {tree}/README.md on box"),
])
def test_a_bad_typed_path_gets_its_one_line_and_the_listing_stays(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, box: str, tree: Path, typed: str,
        said: str) -> None:
    dialog = opened(qtbot, box, str(tree))
    wait_listed(qtbot, dialog, str(tree))
    dialog.path.selectAll()
    QTest.keyClicks(dialog.path, f"{tree}/{typed}")
    assert not dialog.choose.isEnabled(), "a typed folder is opened (checked) before Choose"
    QTest.keyClick(dialog.path, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: dialog.status.text() == said.format(tree=tree), timeout=20_000)
    assert not dialog.choose.isEnabled(), "a folder that failed its check cannot be chosen"
    assert dialog.folders.count() == 4, "the last good listing stays"


def test_an_unknown_host_is_said_in_one_line(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                             home: Path) -> None:
    dialog = opened(qtbot, "exec:/nonexistent/runner", "")
    qtbot.waitUntil(lambda: "cannot start ssh" in dialog.status.text()
                    or "No such file" in dialog.status.text(), timeout=20_000)
    assert "\n" not in dialog.status.text() and dialog.shown is None


def test_the_picker_in_dark(qtbot: QtBot, qloop: asyncio.AbstractEventLoop, box: str,
                            tree: Path, tmp_path: Path) -> None:
    theme.apply_theme("dark")
    try:
        dialog = opened(qtbot, box, str(tree))
        wait_listed(qtbot, dialog, str(tree))
        dialog.path.setText(f"{tree}/nowhere")
        QTest.keyClick(dialog.path, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: "no such folder" in dialog.status.text(), timeout=20_000)
        save_shot(dialog, tmp_path, "remote-folders-dark.png")
    finally:
        theme.apply_theme("light")
