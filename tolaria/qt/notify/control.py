"""The window's facts to the notification book, its commands to the desktop, its actions back.

The bridge's signals (a run started, spoke, asked, ended) feed ``NotificationBook`` and the
``StallWatch`` (a timer asks it when the next run may be stalled). The book's commands go, in
order, through one queue to one worker task that owns the D-Bus connection: the freedesktop
service when the session bus has one, the system tray's balloon otherwise (and for a
notification the service refused). What the user chooses on a notification comes back as an
intent: open the chat, answer the permission question (through the same broker as the card in
the window, so the first answer wins and the other does nothing), stop or restart the run.

Nothing here raises or activates the window, except opening a chat from a notification the
user clicked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import QWidget

from tolaria.chats.notify.book import NotificationBook
from tolaria.chats.notify.notices import (
    PERMISSION,
    STALL,
    AnswerPermission,
    Close,
    Command,
    Intent,
    Notice,
    OpenChat,
    RestartRun,
    Show,
    StopRun,
    question_text,
)
from tolaria.chats.notify.stall import StallWatch
from tolaria.config.settings import Settings
from tolaria.core.events import Done, Event, ToolStart
from tolaria.core.limits import stopped_text
from tolaria.core.permissions import PermissionRequest
from tolaria.core.store.db import Store, Turn
from tolaria.qt.bridge import Bridge
from tolaria.qt.controller import ChatController
from tolaria.qt.notify.tray import TrayNotifications
from tolaria.support.tasks import TaskSet

if TYPE_CHECKING:
    from tolaria.qt.notify.dbus import DBusNotifications

log = logging.getLogger(__name__)

_NO_BUTTONS = {PERMISSION: "Open Tolaria to answer.", STALL: "Open Tolaria to stop or restart it."}
_BADGE = ("badge", None)


class NotificationController(QObject):
    #: The count of questions waiting for the user changed (window title, launcher badge).
    pending_changed = Signal(int)
    #: Where notifications go, once known: "dbus" or "tray", and why not D-Bus ("" if it is).
    backend_chosen = Signal(str, str)

    def __init__(self, bridge: Bridge, store: Store, chats: ChatController, tasks: TaskSet,
                 settings: Settings, *, window: QWidget, icon: QIcon,
                 in_view: Callable[[int], bool], current_chat: Callable[[], int | None],
                 open_chat: Callable[[int], None], dbus_address: str | None = None) -> None:
        super().__init__(window)
        self.store = store
        self.chats = chats
        self.tasks = tasks
        self.open_chat = open_chat
        self._in_view = in_view
        self._current_chat = current_chat
        self.book = NotificationBook(settings.notify_kinds(), in_view=in_view,
                                     enabled=settings.notify_background)
        self.stalls = StallWatch(settings.notify_stall_minutes * 60)
        #: The freedesktop service, once the worker found one (None: the tray is used).
        self.dbus: DBusNotifications | None = None
        self.tray = TrayNotifications(window, icon, self._on_desktop_action)
        #: "dbus" or "tray" once the worker has looked; "" before.
        self.backend = ""
        self._address = dbus_address
        self._conversation_of: dict[str, int] = {}
        self._queue: asyncio.Queue[Command | tuple[str, None]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._pending = 0
        self._stall_timer = QTimer(self)
        self._stall_timer.setSingleShot(True)
        self._stall_timer.timeout.connect(self._on_stall_timer_timeout)
        bridge.run_started.connect(self._on_bridge_run_started)
        bridge.event_received.connect(self._on_bridge_event_received)
        bridge.run_finished.connect(self._on_bridge_run_finished)
        bridge.permission_requested.connect(self._on_bridge_permission_requested)
        bridge.permission_settled.connect(self._on_bridge_permission_settled)
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):  # the window became active (or not)
            app.focusWindowChanged.connect(self._on_app_focus_window_changed)

    # -- life ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker (on the running loop): it looks for the service first."""
        if self._worker is None:
            self._worker = self.tasks.spawn(self._work(), name="notifications")

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()  # our own cancellation: waited for, never re-raised
            await asyncio.wait({self._worker}, timeout=2.0)
            self._worker = None
        if self.dbus is not None:
            await self.dbus.aclose()
        self.tray.hide()
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            with contextlib.suppress(RuntimeError, TypeError):  # a second close: not connected
                app.focusWindowChanged.disconnect(self._on_app_focus_window_changed)

    def configure(self, settings: Settings) -> None:
        self.stalls.after_s = settings.notify_stall_minutes * 60
        self._run(self.book.configure(settings.notify_kinds(), settings.notify_background))
        self._arm_stall_timer()

    def chat_shown(self, conversation_id: int) -> None:
        """The window shows this chat now: seen, if the window is active."""
        if self._in_view(conversation_id):
            self._run(self.book.viewed(conversation_id))

    def _on_app_focus_window_changed(self, *_: object) -> None:
        current = self._current_chat()
        if current is not None:
            self.chat_shown(current)

    # -- facts -----------------------------------------------------------------------------
    def _title(self, conversation_id: int) -> str:
        conversation = self.store.get_conversation(conversation_id)
        return conversation.title if conversation is not None else "Chat"

    def _on_bridge_run_started(self, stream_id: str, conversation_id: int, _turn: Turn) -> None:
        self._conversation_of[stream_id] = conversation_id
        self.stalls.started(stream_id, conversation_id, time.monotonic())
        self._arm_stall_timer()

    def _on_bridge_event_received(self, stream_id: str, event: Event) -> None:
        if self.stalls.output(stream_id, time.monotonic()):
            self._run(self.book.resumed(stream_id))
            self._arm_stall_timer()
        conversation_id = self._conversation_of.get(stream_id)
        if isinstance(event, ToolStart) and conversation_id is not None:
            text = question_text(event.name, event.input)
            if text is not None:
                self._run(self.book.agent_asked(conversation_id, self._title(conversation_id),
                                                stream_id, event.tool_id, text))

    def _on_bridge_run_finished(self, stream_id: str, done: Done) -> None:
        self.stalls.ended(stream_id)
        conversation_id = self._conversation_of.pop(stream_id, None)
        if conversation_id is None:
            return
        limit = stopped_text(done.limit, done.limit_value) if done.limit else None
        self._run(self.book.run_finished(conversation_id, self._title(conversation_id),
                                         stream_id, done.stop_reason, limit))

    def _on_bridge_permission_requested(self, stream_id: str, key: str, request: object) -> None:
        conversation_id = self._conversation_of.get(stream_id)
        if conversation_id is None or not isinstance(request, PermissionRequest):
            return
        self.stalls.asking(stream_id, time.monotonic(), True)
        allow = request.choice("allow_once", "allow_always")
        deny = request.choice("reject_once", "reject_always")
        self._run(self.book.permission_asked(
            conversation_id, self._title(conversation_id), stream_id, key, request.title,
            allow.option_id if allow is not None else None,
            deny.option_id if deny is not None else ""))

    def _on_bridge_permission_settled(self, stream_id: str, key: str, _outcome: str) -> None:
        self.stalls.asking(stream_id, time.monotonic(), False)
        self._arm_stall_timer()
        self._run(self.book.permission_settled(stream_id, key))

    def _on_stall_timer_timeout(self) -> None:
        for stall in self.stalls.due(time.monotonic()):
            self._run(self.book.stalled(stall.conversation_id,
                                        self._title(stall.conversation_id), stall.stream_id,
                                        stall.silence, self.stalls.after_s))
        self._arm_stall_timer()

    def _arm_stall_timer(self) -> None:
        wait = self.stalls.next_due(time.monotonic())
        if wait is None:
            self._stall_timer.stop()
        else:
            self._stall_timer.start(int(wait * 1000) + 50)

    # -- actions ---------------------------------------------------------------------------
    def _on_desktop_action(self, slot: str, action: str) -> None:
        intent, commands = self.book.invoked(slot, action)
        self._run(commands)
        if intent is not None:
            self.carry_out(intent)

    def carry_out(self, intent: Intent) -> None:
        if isinstance(intent, OpenChat):
            self.open_chat(intent.conversation_id)
        elif isinstance(intent, AnswerPermission):
            # The broker answers once: a question the window answered first stays as it is.
            self.chats.answer_permission(intent.stream_id, intent.key, intent.option_id)
        elif self.chats.running_stream(intent.conversation_id) == intent.stream_id:
            # Only the run the notification was about: never a newer turn of the chat.
            if isinstance(intent, StopRun):
                self.chats.stop(intent.conversation_id)
            elif isinstance(intent, RestartRun):
                self.chats.restart(intent.conversation_id)

    # -- the desktop -----------------------------------------------------------------------
    def _run(self, commands: list[Command]) -> None:
        for command in commands:
            self._queue.put_nowait(command)
        pending = self.book.pending_questions()
        if pending != self._pending:
            self._pending = pending
            self.pending_changed.emit(pending)
            self._queue.put_nowait(_BADGE)

    async def _open_dbus(self) -> str | None:
        """The freedesktop service where the platform has D-Bus; None when ready, else why not."""
        if sys.platform in ("darwin", "win32"):
            return "no freedesktop notification service on this platform"
        try:  # jeepney is a dependency where D-Bus is (pyproject's marker)
            from tolaria.qt.notify.dbus import DBusNotifications
        except ImportError as exc:
            return f"jeepney is not installed ({exc})"
        dbus = DBusNotifications(self._on_desktop_action, self.book.dismissed)
        why = await dbus.open(self._address)
        if why is None:
            self.dbus = dbus
        return why

    async def _work(self) -> None:
        why = await self._open_dbus()
        self.backend = "dbus" if why is None else "tray"
        if why is not None:
            log.info("desktop notifications through the system tray: %s", why)
        self.backend_chosen.emit(self.backend, why or "")
        while True:
            command = await self._queue.get()
            try:
                await self._apply(command)
            except (OSError, TimeoutError, RuntimeError, ValueError) as exc:
                log.warning("a desktop notification failed: %s", exc)

    async def _apply(self, command: Command | tuple[str, None]) -> None:
        if isinstance(command, Show):
            notice = command.notice
            if self.dbus is not None:
                note = "" if self.dbus.actions else _NO_BUTTONS.get(notice.kind, "")
                if await self.dbus.show(notice, body_note=note):
                    return
            self._tray_show(notice)
        elif isinstance(command, Close):
            self.tray.close(command.slot)
            if self.dbus is not None:
                await self.dbus.close(command.slot)
        elif self.dbus is not None:
            await self.dbus.set_badge(self._pending)

    def _tray_show(self, notice: Notice) -> None:
        self.tray.show(notice, body_note=_NO_BUTTONS.get(notice.kind, ""))
