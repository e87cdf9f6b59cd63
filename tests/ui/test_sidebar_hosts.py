"""The chat list grouped by host (issue 25 item 1), on the real sidebar: this computer's chats
first, each other machine's under its heading (name order), a chat moving when its host
changes, a heading gone with its last chat, folding by a click (kept across new chats, a
search looks into folded groups too), fan-out groups untouched. Pictures:
docs/sidebar-hosts[-dark].png with ``TOLARIA_DOCS_SHOTS=1``."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import save_shot

from tolaria.core.store.db import Conversation
from tolaria.ui import theme
from tolaria.ui.sidebar.sidebar import Sidebar
from tolaria.ui.sidebar.sidebar_hosts import HOST_ROLE


def chat(cid: int, title: str, host: str | None = None, agent: str = "claude") -> Conversation:
    now = time.time() - 3600 + cid
    return Conversation(id=cid, title=title, agent=agent, cwd="/w", created_at=now,
                        agent_session_id=None,
                        updated_at=now, host=host)


def rows(sidebar: Sidebar) -> list[str]:
    out = []
    for i in range(sidebar.list.count()):
        item = sidebar.list.item(i)
        if item.isHidden():
            continue
        out.append(f"[{item.data(HOST_ROLE)}]" if item.data(HOST_ROLE) else item.text())
    return out


def click_heading(sidebar: Sidebar, host: str) -> None:
    header = sidebar._host_headers[host]
    rect = sidebar.list.visualItemRect(header)
    QTest.mouseClick(sidebar.list.viewport(), Qt.MouseButton.LeftButton,
                     pos=rect.center())


def test_chats_grouped_by_host(qtbot: QtBot, tmp_path: Path) -> None:
    sidebar = Sidebar()
    qtbot.addWidget(sidebar)
    sidebar.resize(280, 560)
    sidebar.show()
    for c in (chat(1, "Fix the parser"), chat(2, "Deploy notes", "devbox"),
              chat(3, "Refactor CLI"), chat(4, "GPU run", "ssh://me@gpu:2222"),
              chat(5, "Logs on devbox", "devbox"), chat(6, "Container smoke", "exec:docker exec -i box")):
        sidebar.conversation_saved(c)
    assert rows(sidebar) == ["Refactor CLI", "Fix the parser",
                             "[devbox]", "Logs on devbox", "Deploy notes",
                             "[exec:docker exec -i box]", "Container smoke",
                             "[ssh://me@gpu:2222]", "GPU run"]
    assert sidebar.host_groups()[0] == ("devbox", [5, 2])
    assert sidebar.ids() == [3, 1, 5, 2, 6, 4]  # headings are no chats

    sidebar.select(5)
    for name in ("light", "dark"):
        theme.apply_theme(name)
        qtbot.wait(50)
        save_shot(sidebar, tmp_path, f"sidebar-hosts{'' if name == 'light' else '-dark'}.png")
    theme.apply_theme("light")

    # A chat whose host changes moves; the heading goes with its last chat.
    sidebar.conversation_saved(dataclasses.replace(chat(4, "GPU run"), host=None))
    assert "[ssh://me@gpu:2222]" not in rows(sidebar)
    assert rows(sidebar)[0] == "GPU run"
    sidebar.conversation_saved(dataclasses.replace(chat(1, "Fix the parser"), host="devbox"))
    assert sidebar.host_groups()[0] == ("devbox", [1, 5, 2])
    assert sidebar.current_id() == 5, "moving another row keeps the selection"
    sidebar.conversation_deleted(6)
    assert "[exec:docker exec -i box]" not in rows(sidebar)

    # Folding: a click on the heading; kept when a chat arrives there; a search looks inside.
    click_heading(sidebar, "devbox")
    assert sidebar.is_host_collapsed("devbox")
    assert rows(sidebar) == ["GPU run", "Refactor CLI", "[devbox]"]
    assert sidebar.visible_ids() == [4, 3]
    sidebar.conversation_saved(chat(7, "Another on devbox", "devbox"))
    assert rows(sidebar) == ["GPU run", "Refactor CLI", "[devbox]"]
    sidebar.search.setText("logs")
    assert rows(sidebar) == ["[devbox]", "Logs on devbox"]
    sidebar.search.setText("refactor")
    assert rows(sidebar) == ["Refactor CLI"], "a heading with no match is hidden"
    sidebar.search.clear()
    assert rows(sidebar) == ["GPU run", "Refactor CLI", "[devbox]"]
    click_heading(sidebar, "devbox")
    assert not sidebar.is_host_collapsed("devbox")
    assert len(rows(sidebar)) == 7
    assert sidebar.list.currentItem() is sidebar._items[5], "a heading click selects nothing"
    heading = sidebar.list.visualItemRect(sidebar._host_headers["devbox"]).center()
    sidebar.list.customContextMenuRequested.emit(heading)  # no chat menu on a heading
    assert sidebar.current_id() == 5


def test_fan_out_groups_and_host_groups_together(qtbot: QtBot) -> None:
    sidebar = Sidebar()
    qtbot.addWidget(sidebar)
    for c in (chat(1, "job · claude"), chat(2, "job · codex"), chat(3, "Remote", "devbox"),
              chat(4, "Local")):
        sidebar.conversation_saved(c)
    sidebar.set_groups([("Fix the tests", [1, 2])])
    assert sidebar.groups() == [("Fix the tests", [1, 2])]
    assert sidebar.host_groups() == [("devbox", [3])]
    assert sidebar.ids()[-1] == 3, "the host's chats stay after this computer's"
