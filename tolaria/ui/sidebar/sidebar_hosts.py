"""The chat list grouped by host (issue 25 item 1): this computer's chats first, ungrouped; each
other machine's chats under a heading row with the host's name, in name order, collapsible
(a click on the heading, or on a focused heading Left / Right / Space / Enter as in tree views;
the folded hosts are kept across restarts by the app, ``folding_changed``). The search looks
through every group: a collapsed group opens its matches while a search is typed.

A mixin of the sidebar (its ``list`` and ``_items``), as the fan-out groups are
(sidebar_groups.py). Heading rows carry ``HOST_ROLE`` and no ``ID_ROLE``: every id query skips
them; they can be the current row (keyboard focus) but are never selected. A chat's row moves only when it is new or its host changed, so saving a chat (each turn)
costs what it did.
"""

from __future__ import annotations

import builtins

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QListWidget, QListWidgetItem

from tolaria.ui.sidebar.sidebar_groups import ID_ROLE

#: On a host heading row: the host (the chat's destination as stored).
HOST_ROLE = Qt.ItemDataRole.UserRole + 5
#: On a host heading row: whether its chats are folded away.
COLLAPSED_ROLE = Qt.ItemDataRole.UserRole + 6
#: On a host heading row: how many chats it holds.
COUNT_ROLE = Qt.ItemDataRole.UserRole + 7
Items = builtins.list[QListWidgetItem]


class SidebarHosts:
    list: QListWidget
    _items: dict[int, QListWidgetItem]

    def _init_hosts(self) -> None:
        #: host -> its heading row.
        self._host_headers: dict[str, QListWidgetItem] = {}
        #: chat id -> its host ("" for this computer), as placed.
        self._host_of: dict[int, str] = {}
        #: hosts whose chats are folded away.
        self._collapsed: set[str] = set()

    def _apply_filter(self) -> None:
        raise NotImplementedError

    def _folding_changed(self) -> None:
        """The folded hosts changed (the sidebar says so, for the app to keep them)."""
        raise NotImplementedError

    # -- placing rows ------------------------------------------------------------------------------
    def _place(self, conversation_id: int, host: str) -> None:
        """The chat's row where its host's chats are: new, or its host changed."""
        item = self._items[conversation_id]
        before = self._host_of.get(conversation_id)
        if before == host and self.list.row(item) >= 0:
            return
        current = self.list.currentItem()
        self.list.blockSignals(True)
        row = self.list.row(item)
        if row >= 0:
            self.list.takeItem(row)
        if host:
            self.list.insertItem(self.list.row(self._header(host)) + 1, item)
        else:
            self.list.insertItem(0, item)
        self._host_of[conversation_id] = host
        if before:
            self._drop_if_empty(before)
        if current is not None and self.list.row(current) >= 0:
            self.list.setCurrentItem(current)
        self.list.blockSignals(False)
        self._count(host)

    def _forget_host(self, conversation_id: int) -> None:
        """The chat's row was taken out of the list (deleted)."""
        host = self._host_of.pop(conversation_id, "")
        if host:
            self._drop_if_empty(host)
            self._count(host)

    def _header(self, host: str) -> QListWidgetItem:
        header = self._host_headers.get(host)
        if header is not None:
            return header
        header = QListWidgetItem(host)
        header.setData(HOST_ROLE, host)
        header.setData(COLLAPSED_ROLE, host in self._collapsed)
        # Focusable by the keyboard (Left folds, Right unfolds), never selected: a click folds.
        header.setFlags(Qt.ItemFlag.ItemIsEnabled)
        header.setToolTip(f"Chats on {host}: click (or Space) to fold or unfold")
        header.setData(Qt.ItemDataRole.AccessibleDescriptionRole,
                       "Left folds, Right unfolds, Space or Enter toggles")
        after = sorted(h for h in self._host_headers if h > host)
        row = self.list.row(self._host_headers[after[0]]) if after else self.list.count()
        self.list.insertItem(row, header)
        self._host_headers[host] = header
        return header

    def _drop_if_empty(self, host: str) -> None:
        header = self._host_headers.get(host)
        if header is not None and not self._host_members(header):
            self.list.takeItem(self.list.row(header))
            del self._host_headers[host]

    def _host_members(self, header: QListWidgetItem) -> Items:
        row = self.list.row(header) + 1
        members = []
        while row < self.list.count() and not self.list.item(row).data(HOST_ROLE):
            members.append(self.list.item(row))
            row += 1
        return members

    def _count(self, host: str) -> None:
        header = self._host_headers.get(host)
        if header is None:
            return
        count = len(self._host_members(header))
        collapsed = host in self._collapsed
        header.setData(COUNT_ROLE, count)
        header.setData(COLLAPSED_ROLE, collapsed)
        header.setData(Qt.ItemDataRole.AccessibleTextRole,
                       f"Host {host}, {count} chat{'s' if count != 1 else ''}, "
                       + ("folded" if collapsed else "unfolded"))

    # -- folding and the search ------------------------------------------------------------------
    def host_groups(self) -> builtins.list[tuple[str, builtins.list[int]]]:
        """(host, chat ids in the order shown) of each host heading, top to bottom."""
        headers = sorted(self._host_headers.values(), key=self.list.row)
        return [(str(h.data(HOST_ROLE)), [int(m.data(ID_ROLE)) for m in self._host_members(h)])
                for h in headers]

    def set_host_collapsed(self, host: str, collapsed: bool) -> None:
        if (host in self._collapsed) == collapsed:
            return
        if collapsed:
            self._collapsed.add(host)
        else:
            self._collapsed.discard(host)
        self._count(host)
        self._apply_filter()
        self._folding_changed()

    def folded_hosts(self) -> builtins.list[str]:
        return sorted(self._collapsed)

    def restore_folded_hosts(self, hosts: builtins.list[str]) -> None:
        """The folded hosts of the last run (before or after their chats are listed)."""
        self._collapsed = set(hosts)
        for host in self._host_headers:
            self._count(host)
        self._apply_filter()

    def _host_key(self, event: QKeyEvent) -> bool:
        """Left / Right / Space / Enter on a focused host heading fold or unfold it; Left on a
        chat of a host's group goes to its heading (as in tree views). True: handled."""
        item = self.list.currentItem()
        if item is None:
            return False
        key = event.key()
        host = item.data(HOST_ROLE)
        if not host:
            owner = self._host_of.get(int(item.data(ID_ROLE))) if item.data(ID_ROLE) is not None \
                else None
            if key == Qt.Key.Key_Left and owner and owner in self._host_headers:
                self.list.setCurrentItem(self._host_headers[owner])
                return True
            return False
        host = str(host)
        if key == Qt.Key.Key_Left:
            self.set_host_collapsed(host, True)
        elif key == Qt.Key.Key_Right:
            self.set_host_collapsed(host, False)
        elif key in (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.set_host_collapsed(host, host not in self._collapsed)
        else:
            return False
        return True

    def is_host_collapsed(self, host: str) -> bool:
        return host in self._collapsed

    def _host_header_clicked(self, pos: QPoint) -> bool:
        """A click on a host heading folds or unfolds it (True: it was one)."""
        item = self.list.itemAt(pos)
        host = item.data(HOST_ROLE) if item is not None else None
        if not host:
            return False
        self.set_host_collapsed(str(host), str(host) not in self._collapsed)
        return True

    def _filter_hosts(self, searching: bool) -> None:
        """After the search hid what does not match: fold collapsed groups (not while
        searching) and hide a heading with nothing to show."""
        for host, header in self._host_headers.items():
            members = self._host_members(header)
            if not searching and host in self._collapsed:
                for member in members:
                    member.setHidden(True)
                header.setHidden(False)
            else:
                header.setHidden(searching and all(m.isHidden() for m in members))
