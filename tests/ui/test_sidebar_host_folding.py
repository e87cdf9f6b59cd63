"""The sidebar's host groups (issue 25 follow-up): folded and unfolded with the keyboard as in
tree views (Up/Down reach a heading; Left folds, Right unfolds, Space/Enter toggle; Left on a
chat of a group goes to its heading), with accessible names that say folded or not; and the
folded hosts kept across a restart of the real app (window.json in the data folder, written
atomically; a broken one is set aside and the window starts unfolded)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QSignalSpy, QTest
from pytestqt.qtbot import QtBot
from ui.test_chat_host import box  # noqa: F401 (the fixture)
from ui.test_sidebar_hosts import chat, click_heading, rows
from ui.uihelpers import AppDriver, save_shot

from tolaria.ui import theme
from tolaria.ui.sidebar.sidebar import Sidebar

StartApp = Callable[..., AppDriver]


def key(sidebar: Sidebar, which: Qt.Key) -> None:
    QTest.keyClick(sidebar.list, which)


def test_host_groups_fold_and_unfold_with_the_keyboard(qtbot: QtBot, tmp_path: Path) -> None:
    sidebar = Sidebar()
    qtbot.addWidget(sidebar)
    sidebar.resize(280, 400)
    sidebar.show()
    for c in (chat(1, "Here"), chat(2, "On devbox", "devbox"), chat(3, "Also devbox", "devbox")):
        sidebar.conversation_saved(c)
    opened: list[int] = []
    sidebar.open_requested.connect(opened.append)
    folds = QSignalSpy(sidebar.folding_changed)
    sidebar.select(1)
    opened.clear()
    sidebar.list.setFocus()
    key(sidebar, Qt.Key.Key_Down)  # from the chat here onto devbox's heading
    heading = sidebar._host_headers["devbox"]
    assert sidebar.list.currentItem() is heading
    assert sidebar.current_id() is None and opened == [], "a heading opens no chat"
    assert not heading.isSelected()
    assert heading.data(Qt.ItemDataRole.AccessibleTextRole) == "Host devbox, 2 chats, unfolded"
    assert "Left folds" in heading.data(Qt.ItemDataRole.AccessibleDescriptionRole)
    for suffix, name in (("", "light"), ("-dark", "dark")):  # the focused heading's ring
        theme.apply_theme(name)
        qtbot.wait(50)
        save_shot(sidebar, tmp_path, f"sidebar-host-focus{suffix}.png")
    theme.apply_theme("light")

    key(sidebar, Qt.Key.Key_Left)
    assert sidebar.is_host_collapsed("devbox")
    assert rows(sidebar) == ["Here", "[devbox]"]
    assert heading.data(Qt.ItemDataRole.AccessibleTextRole) == "Host devbox, 2 chats, folded"
    key(sidebar, Qt.Key.Key_Right)
    assert not sidebar.is_host_collapsed("devbox")
    assert rows(sidebar) == ["Here", "[devbox]", "Also devbox", "On devbox"]
    key(sidebar, Qt.Key.Key_Space)
    assert sidebar.is_host_collapsed("devbox")
    key(sidebar, Qt.Key.Key_Return)
    assert not sidebar.is_host_collapsed("devbox")
    assert [list(folds.at(i)[0]) for i in range(folds.count())] == [
        ["devbox"], [], ["devbox"], []]

    key(sidebar, Qt.Key.Key_Down)  # into the group: a chat, opened as before
    assert sidebar.current_id() == 3 and opened == [3]
    key(sidebar, Qt.Key.Key_Left)  # back to its heading, as in a tree
    assert sidebar.list.currentItem() is heading
    assert not sidebar.is_host_collapsed("devbox")
    key(sidebar, Qt.Key.Key_Up)
    assert sidebar.current_id() == 1


def test_folded_hosts_are_kept_across_a_restart(start_app: StartApp, box: str,  # noqa: F811
                                                tmp_path: Path, qtbot: QtBot) -> None:
    store = tmp_path / "db" / "tolaria.sqlite3"
    store.parent.mkdir()
    home = store.parent  # the data folder
    first = start_app(store_path=store)
    on_box = first.pane.conversation_id
    first.app.controller.set_host(on_box, box)
    qtbot.waitUntil(lambda: "box" in first.window.sidebar._host_headers)
    sidebar = first.window.sidebar
    click_heading(sidebar, "box")
    assert sidebar.is_host_collapsed("box")
    state = home / "window.json"
    assert json.loads(state.read_text()) == {"folded_hosts": ["box"]}
    first.close()

    second = start_app(store_path=store)
    sidebar = second.window.sidebar
    qtbot.waitUntil(lambda: "box" in sidebar._host_headers)
    assert sidebar.is_host_collapsed("box")
    assert sidebar._host_headers["box"].data(Qt.ItemDataRole.AccessibleTextRole).endswith(
        "folded")
    assert all(m.isHidden() for m in sidebar._host_members(sidebar._host_headers["box"]))
    click_heading(sidebar, "box")  # unfolded: kept so too
    assert json.loads(state.read_text()) == {"folded_hosts": []}
    second.close()

    state.write_text("{half a file")
    third = start_app(store_path=store)
    qtbot.waitUntil(lambda: "box" in third.window.sidebar._host_headers)
    assert not third.window.sidebar.is_host_collapsed("box")
    assert (home / "window.json.bad").read_text() == "{half a file"
