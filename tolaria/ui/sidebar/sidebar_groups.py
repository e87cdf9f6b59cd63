"""Groups in the chat list: a fan-out job's member chats shown together under a header row.

A mixin of the sidebar (it uses its ``list`` and ``_items``): header rows carry ``GROUP_ROLE``
and no ``ID_ROLE``, so every id query skips them; they cannot be selected or focused.
"""

from __future__ import annotations

import builtins

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QListWidget, QListWidgetItem

ID_ROLE = Qt.ItemDataRole.UserRole
#: On a group header row (a fan-out job): its label. Header rows have no ID_ROLE.
GROUP_ROLE = Qt.ItemDataRole.UserRole + 3
#: On a member of a group: drawn indented under its header.
MEMBER_ROLE = Qt.ItemDataRole.UserRole + 4
#: (label, member conversation ids)
Group = tuple[str, builtins.list[int]]
Items = builtins.list[QListWidgetItem]


class SidebarGroups:
    list: QListWidget
    _items: dict[int, QListWidgetItem]
    #: (label, member conversation ids) of each group (fan-out job), oldest first.
    _groups: builtins.list[Group]
    _headers: Items

    def _apply_filter(self) -> None:
        raise NotImplementedError

    def _rows(self) -> Items:
        return [self.list.item(i) for i in range(self.list.count())]

    def _members_under(self, header: QListWidgetItem) -> Items:
        row = self.list.row(header) + 1
        members = []
        while row < self.list.count() and self.list.item(row).data(MEMBER_ROLE):
            members.append(self.list.item(row))
            row += 1
        return members

    def set_groups(self, groups: builtins.list[Group]) -> None:
        """Show each group's chats together under a header row, where its newest member was."""
        self._groups = [(label, [c for c in ids if c in self._items]) for label, ids in groups]
        self._groups = [(label, ids) for label, ids in self._groups if ids]
        current = self.list.currentItem()
        self.list.blockSignals(True)
        for header in self._headers:
            self.list.takeItem(self.list.row(header))
        self._headers = []
        group_of = {c: n for n, (_label, ids) in enumerate(self._groups) for c in ids}
        order: Items = []
        placed: set[int] = set()
        for item in self._rows():
            if item.data(ID_ROLE) is None:  # a host's heading (sidebar_hosts.py) stays put
                order.append(item)
                continue
            conversation_id = int(item.data(ID_ROLE))
            group = group_of.get(conversation_id)
            item.setData(MEMBER_ROLE, group is not None)
            if group is None:
                order.append(item)
            elif group not in placed:
                placed.add(group)
                label, ids = self._groups[group]
                header = QListWidgetItem(label)
                header.setData(GROUP_ROLE, label)
                header.setData(Qt.ItemDataRole.AccessibleTextRole, f"Job: {label}")
                header.setFlags(Qt.ItemFlag.NoItemFlags)
                self._headers.append(header)
                order += [header, *(self._items[c] for c in ids)]
        while self.list.count():
            self.list.takeItem(0)
        for item in order:
            self.list.addItem(item)
        if current is not None and self.list.row(current) >= 0:
            self.list.setCurrentItem(current)
        self.list.blockSignals(False)
        self._apply_filter()

    def groups(self) -> builtins.list[Group]:
        """(header, member ids in the order shown) of each group, top to bottom."""
        headers = sorted(self._headers, key=self.list.row)
        return [(str(h.data(GROUP_ROLE)), [int(m.data(ID_ROLE)) for m in self._members_under(h)])
                for h in headers]
