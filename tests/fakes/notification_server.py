"""A desktop notification service for tests: ``python notification_server.py ADDRESS LOG [MODE]``.

A real separate process on the test's own D-Bus session bus (``ADDRESS``), written with jeepney
(pure Python, not the QtDBus code under test), that owns ``org.freedesktop.Notifications`` and
implements its methods: ``GetCapabilities`` (with "actions", or without it in MODE
``no-actions``), ``Notify`` (a new id, or ``replaces_id``), ``CloseNotification`` (emits
``NotificationClosed`` reason 3, like real servers) and ``GetServerInformation``.

Every call is appended to ``LOG`` as one JSON line ``{"method", "args", "sender", "id"}`` (hints
as ``{name: value}``), so a test can read what the app sent. A test drives the user's side
through the ``org.tolaria.TestNotifications`` interface on the same object: ``Invoke(u id, s
action)`` emits ``ActionInvoked``, ``Dismiss(u id)`` emits ``NotificationClosed`` reason 2
(dismissed by the user). ``com.canonical.Unity.LauncherEntry`` signals (the launcher badge)
are recorded as ``launcher.Update``. The line ``ready`` is printed once the name is owned.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from jeepney import (
    DBusAddress,
    HeaderFields,
    MatchRule,
    MessageType,
    new_error,
    new_method_return,
    new_signal,
)
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
TEST_IFACE = "org.tolaria.TestNotifications"
CLOSED_DISMISSED, CLOSED_BY_CALL = 2, 3
#: The argument types of each method, checked like GDBus does.
SIGNATURES = {"GetCapabilities": "", "GetServerInformation": "", "CloseNotification": "u",
              "Notify": "susssasa{sv}i"}
#: What real servers (GNOME Shell, KDE Plasma, dunst) describe of themselves.
INTROSPECTION = f"""<node>
 <interface name="{NAME}">
  <method name="GetCapabilities"><arg type="as" direction="out"/></method>
  <method name="Notify">
   <arg type="s" direction="in"/><arg type="u" direction="in"/><arg type="s" direction="in"/>
   <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="as" direction="in"/>
   <arg type="a{{sv}}" direction="in"/><arg type="i" direction="in"/>
   <arg type="u" direction="out"/>
  </method>
  <method name="CloseNotification"><arg type="u" direction="in"/></method>
  <method name="GetServerInformation">
   <arg type="s" direction="out"/><arg type="s" direction="out"/>
   <arg type="s" direction="out"/><arg type="s" direction="out"/>
  </method>
  <signal name="NotificationClosed"><arg type="u"/><arg type="u"/></signal>
  <signal name="ActionInvoked"><arg type="u"/><arg type="s"/></signal>
 </interface>
</node>"""


def _plain(value: Any) -> Any:
    """A D-Bus value as JSON: variants ``(signature, value)`` lose their signature."""
    if isinstance(value, dict):
        return {k: _plain(v[1] if isinstance(v, tuple) and len(v) == 2 else v)
                for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value


def main() -> int:
    address, log = sys.argv[1], Path(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "actions"
    conn = open_dbus_connection(bus=address)
    reply = conn.send_and_get_reply(message_bus.RequestName(NAME, 4))  # 4: do not queue
    if reply.body[0] != 1:
        print(f"could not own {NAME}: {reply.body}", file=sys.stderr)
        return 1
    # The launcher badge is a broadcast signal: heard here like a dock would hear it.
    conn.send_and_get_reply(message_bus.AddMatch(
        MatchRule(type="signal", interface="com.canonical.Unity.LauncherEntry")))
    signals = DBusAddress(PATH, interface=NAME)
    next_id = 1
    print("ready", flush=True)

    def record(method: str, args: Any, sender: str, nid: int | None = None) -> None:
        with log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"method": method, "args": _plain(args), "sender": sender,
                                 "id": nid}) + "\n")

    while True:
        msg = conn.receive()
        fields = msg.header.fields
        if msg.header.message_type == MessageType.signal \
                and fields.get(HeaderFields.interface) == "com.canonical.Unity.LauncherEntry":
            record("launcher." + str(fields.get(HeaderFields.member)), msg.body,
                   str(fields.get(HeaderFields.sender, "")))
            continue
        if msg.header.message_type != MessageType.method_call:
            continue
        member = fields.get(HeaderFields.member)
        iface = fields.get(HeaderFields.interface)
        sender = str(fields.get(HeaderFields.sender, ""))
        signature = str(fields.get(HeaderFields.signature, ""))
        expected = SIGNATURES.get(str(member)) if iface in (NAME, None) else None
        if expected is not None and signature != expected:
            # As strict as GDBus-based servers (GNOME Shell): a wrong type is refused.
            record("refused", [member, signature], sender)
            conn.send(new_error(msg, "org.freedesktop.DBus.Error.InvalidArgs", "s",
                                (f"{member} takes ({expected}), not ({signature})",)))
        elif member == "Introspect":
            conn.send(new_method_return(msg, "s", (INTROSPECTION,)))
        elif member == "GetCapabilities":
            caps = ["body", "persistence"] + (["actions"] if mode != "no-actions" else [])
            record(member, [], sender)
            conn.send(new_method_return(msg, "as", (caps,)))
        elif member == "GetServerInformation":
            record(member, [], sender)
            conn.send(new_method_return(msg, "ssss", ("test", "tolaria-tests", "1", "1.2")))
        elif member == "Notify":
            replaces = int(msg.body[1])
            nid = replaces if replaces else next_id
            if not replaces:
                next_id += 1
            record(member, msg.body, sender, nid)
            conn.send(new_method_return(msg, "u", (nid,)))
        elif member == "CloseNotification":
            nid = int(msg.body[0])
            record(member, msg.body, sender, nid)
            conn.send(new_method_return(msg))
            conn.send(new_signal(signals, "NotificationClosed", "uu", (nid, CLOSED_BY_CALL)))
        elif iface == TEST_IFACE and member == "Invoke":
            nid, action = int(msg.body[0]), str(msg.body[1])
            record("test.Invoke", msg.body, sender, nid)
            conn.send(new_signal(signals, "ActionInvoked", "us", (nid, action)))
            conn.send(new_method_return(msg))
        elif iface == TEST_IFACE and member == "Dismiss":
            nid = int(msg.body[0])
            record("test.Dismiss", msg.body, sender, nid)
            conn.send(new_signal(signals, "NotificationClosed", "uu", (nid, CLOSED_DISMISSED)))
            conn.send(new_method_return(msg))
        elif member == "Quit":
            conn.send(new_method_return(msg))
            return 0
        else:
            conn.send(new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod", "s",
                                (f"no method {member}",)))


if __name__ == "__main__":
    sys.exit(main())
