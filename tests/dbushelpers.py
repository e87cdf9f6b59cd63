"""A real D-Bus session bus of the test's own and a notification service on it.

``session_bus``: ``dbus-daemon --session --nofork`` started for the test, its address in
``DBUS_SESSION_BUS_ADDRESS`` (a developer's own desktop session is never reached), stopped
and waited for at the end. ``notification_server``: tests/fakes/notification_server.py, a real
separate process owning ``org.freedesktop.Notifications`` there, which records every call and
invokes actions when the test asks (as a user clicking a button).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection

FAKES = Path(__file__).resolve().parent / "fakes"
NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"


class NotificationServer:
    def __init__(self, address: str, log: Path, mode: str = "actions") -> None:
        self.address = address
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKES / "notification_server.py"), address, str(log), mode],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == "ready", f"the notification server did not start: {line!r}"

    def calls(self, method: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text("utf-8").splitlines() if line]
        return [r for r in rows if method is None or r["method"] == method]

    def notifications(self) -> list[dict[str, Any]]:
        """Every ``Notify`` call as {id, replaces, summary, body, actions, hints}."""
        return [{"id": r["id"], "replaces": r["args"][1], "summary": r["args"][3],
                 "body": r["args"][4], "actions": r["args"][5], "hints": r["args"][6]}
                for r in self.calls("Notify")]

    def _test_call(self, member: str, signature: str, body: tuple[Any, ...]) -> None:
        with open_dbus_connection(bus=self.address) as conn:
            address = DBusAddress(PATH, bus_name=NAME, interface="org.tolaria.TestNotifications")
            conn.send_and_get_reply(new_method_call(address, member, signature, body),
                                    timeout=5)

    def invoke(self, notification_id: int, action: str) -> None:
        """The user chose ``action`` on the notification (``ActionInvoked``)."""
        self._test_call("Invoke", "us", (notification_id, action))

    def dismiss(self, notification_id: int) -> None:
        self._test_call("Dismiss", "u", (notification_id,))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def session_bus(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    daemon = shutil.which("dbus-daemon")
    if daemon is None:
        pytest.skip("dbus-daemon is not installed (apt-get install dbus)")
    proc = subprocess.Popen([daemon, "--session", "--nofork", "--print-address=1"],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    address = proc.stdout.readline().strip()
    assert address.startswith("unix:"), address
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
    yield address
    proc.terminate()
    proc.wait(10)
    proc.stdout.close()


@pytest.fixture
def notification_server(session_bus: str, tmp_path: Path
                        ) -> Iterator[Callable[..., NotificationServer]]:
    servers: list[NotificationServer] = []

    def start(mode: str = "actions") -> NotificationServer:
        server = NotificationServer(session_bus, tmp_path / f"notify-{len(servers)}.jsonl", mode)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def wait_for(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """For the tests outside Qt's loop."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out")
