"""``org.freedesktop.Notifications`` and the launcher badge over the D-Bus session bus.

Spoken with jeepney on the app's asyncio loop, not QtDBus: PySide6 marshals every Python int as
a signed 32-bit (or 16-bit) D-Bus integer, and the Notifications interface takes unsigned ones
(``Notify``'s ``replaces_id``, ``CloseNotification``'s id); GDBus-based servers (GNOME Shell)
refuse such a call (ADR 0030). jeepney writes the exact signature.

One notification per slot (a chat): its id is kept, and the next ``show`` of the slot sends it
as ``replaces_id`` so the server replaces it in place. ``ActionInvoked`` and
``NotificationClosed`` of our own ids are handed to ``on_action`` / ``on_closed`` by slot; those
of other applications' notifications (signals are broadcast) are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

from jeepney import (
    DBusAddress,
    HeaderFields,
    MatchRule,
    MessageType,
    message_bus,
    new_method_call,
    new_signal,
)
from jeepney.io.asyncio import DBusConnection, DBusRouter, Proxy, open_dbus_connection

from tolaria.chats.notify.notices import Notice
from tolaria.support.desktop import APP_ID

log = logging.getLogger(__name__)

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
_SERVICE = DBusAddress(PATH, bus_name=NAME, interface=NAME)
#: Unity's launcher API (also read by KDE Plasma's task manager and dash-to-dock).
LAUNCHER_PATH = f"/com/canonical/unity/launcherentry/{APP_ID}"
LAUNCHER_IFACE = "com.canonical.Unity.LauncherEntry"
_CALL_TIMEOUT_S = 3.0
_EARLY_KEPT = 32


class DBusNotifications:
    def __init__(self, on_action: Callable[[str, str], None],
                 on_closed: Callable[[str], None]) -> None:
        self.on_action = on_action
        self.on_closed = on_closed
        #: The server's capabilities (``GetCapabilities``), once open.
        self.capabilities: frozenset[str] = frozenset()
        self._conn: DBusConnection | None = None
        self._router: DBusRouter | None = None
        self._listener: asyncio.Task[None] | None = None
        self._ids: dict[str, int] = {}
        self._slots: dict[int, str] = {}
        #: Signals about ids not known (yet): see ``_listen``.
        self._early: list[Any] = []

    @property
    def actions(self) -> bool:
        """Whether the server shows action buttons."""
        return "actions" in self.capabilities

    async def open(self, address: str | None = None) -> str | None:
        """Connect to the session bus and ask the service; None when ready, else why not."""
        address = address or os.environ.get("DBUS_SESSION_BUS_ADDRESS")
        if not address:
            return "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set)"
        try:
            self._conn = await asyncio.wait_for(open_dbus_connection(address), _CALL_TIMEOUT_S)
            self._router = DBusRouter(self._conn)
            reply = await self._call("GetCapabilities", "", ())
        except (OSError, TimeoutError, ValueError, RuntimeError) as exc:
            await self.aclose()
            return f"the D-Bus session bus cannot be reached: {exc}"
        if reply.header.message_type == MessageType.error:
            await self.aclose()
            return f"no notification service on the session bus ({reply.body[0] if reply.body else 'error'})"
        self.capabilities = frozenset(str(c) for c in reply.body[0])
        rule = MatchRule(type="signal", interface=NAME, path=PATH)
        await Proxy(message_bus, self._router).AddMatch(rule)
        self._listener = asyncio.get_running_loop().create_task(self._listen(rule),
                                                                name="notification-signals")
        return None

    async def show(self, notice: Notice, *, body_note: str = "") -> bool:
        """Put ``notice`` on screen, replacing its slot's notification; False if refused."""
        actions: list[str] = []
        if self.actions:
            for action in notice.actions:
                actions += [action.key, action.label]
        hints: dict[str, tuple[str, Any]] = {
            "desktop-entry": ("s", APP_ID), "urgency": ("y", 1),
            "category": ("s", "x-tolaria." + notice.kind)}
        body = notice.body + (f"\n{body_note}" if body_note else "")
        reply = await self._call("Notify", "susssasa{sv}i", (
            "Tolaria", self._ids.get(notice.slot, 0), APP_ID, notice.summary, body, actions,
            hints, -1))
        if reply.header.message_type == MessageType.error:
            log.warning("the notification service refused a notification: %s", reply.body)
            return False
        nid = int(reply.body[0])
        old = self._ids.get(notice.slot)
        if old is not None and old != nid:
            self._slots.pop(old, None)
        self._ids[notice.slot] = nid
        self._slots[nid] = notice.slot
        early = [m for m in self._early if int(m.body[0]) == nid]
        self._early = [m for m in self._early if int(m.body[0]) != nid]
        for message in early:
            self._handle(message)
        return True

    async def close(self, slot: str) -> None:
        nid = self._ids.pop(slot, None)
        if nid is None:
            return
        self._slots.pop(nid, None)
        await self._call("CloseNotification", "u", (nid,))

    async def set_badge(self, count: int) -> None:
        """The launcher's count (``com.canonical.Unity.LauncherEntry.Update``), hidden at 0."""
        if self._router is None:
            return
        signal = new_signal(DBusAddress(LAUNCHER_PATH, interface=LAUNCHER_IFACE), "Update",
                            "sa{sv}", (f"application://{APP_ID}.desktop",
                                       {"count": ("x", count),
                                        "count-visible": ("b", count > 0)}))
        await self._router.send(signal)

    async def aclose(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        if self._router is not None:
            with contextlib.suppress(Exception):
                await self._router.__aexit__(None, None, None)
            self._router = None
        if self._conn is not None:
            with contextlib.suppress(OSError):
                await self._conn.close()
            self._conn = None

    async def _call(self, method: str, signature: str, body: tuple[Any, ...]) -> Any:
        if self._router is None:
            raise RuntimeError("not connected")
        message = new_method_call(_SERVICE, method, signature or None, body)
        return await asyncio.wait_for(self._router.send_and_get_reply(message), _CALL_TIMEOUT_S)

    async def _listen(self, rule: MatchRule) -> None:
        assert self._router is not None
        with self._router.filter(rule, bufsize=256) as queue:
            while True:
                message = await queue.get()
                nid = int(message.body[0]) if message.body else 0
                if nid in self._slots:
                    self._handle(message)
                else:
                    # Another application's notification, or ours whose Notify reply is
                    # still on its way to ``show`` (a click within microseconds): kept a
                    # little while, replayed by ``show``.
                    self._early.append(message)
                    del self._early[:-_EARLY_KEPT]

    def _handle(self, message: Any) -> None:
        member = message.header.fields.get(HeaderFields.member)
        nid = int(message.body[0])
        slot = self._slots.get(nid)
        if slot is None:
            return
        try:
            if member == "ActionInvoked":
                self.on_action(slot, str(message.body[1]))
            elif member == "NotificationClosed":
                self._slots.pop(nid, None)
                if self._ids.get(slot) == nid:
                    del self._ids[slot]
                self.on_closed(slot)
        except Exception:  # one bad answer never ends the listening
            log.exception("handling the notification service's %s failed", member)
