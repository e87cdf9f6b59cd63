"""The main window's fan-out jobs: the "Ask several agents" form, one side-by-side window per
job, and Run → Jobs, which lists every stored job (newest first) and reopens its window.

A reopened job's window gets its members' stored transcripts through the ordinary open path
(``open_requested`` per member): nothing here reads the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, SignalInstance
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QWidget

from tolaria.chats.fanout import FanOutJob
from tolaria.chats.titles import clip_line
from tolaria.core.limits import RunLimits
from tolaria.ui.fanout.fanout_dialog import FanOutDialog, agents_of
from tolaria.ui.fanout.fanout_view import FanOutView
from tolaria.ui.transcript.markdown import plain_tooltip

if TYPE_CHECKING:
    from tolaria.qt.bridge import Bridge
    from tolaria.ui.chat.chat_stack import ChatStack
    from tolaria.ui.chat.header import ChatHeader
    from tolaria.ui.sidebar.sidebar import Sidebar


class JobHost(Protocol):
    """What the job windows need of the main window (a protocol: no import of it here)."""

    header: ChatHeader
    stack: ChatStack
    sidebar: Sidebar
    stop_requested: SignalInstance
    stop_job_requested: SignalInstance
    send_requested: SignalInstance
    queue_requested: SignalInstance
    unqueue_requested: SignalInstance
    queue_change_requested: SignalInstance
    restart_requested: SignalInstance
    permission_answer_requested: SignalInstance
    open_requested: SignalInstance

    def stop_hint(self) -> str: ...

    def bridge(self) -> Bridge | None: ...

    def fan_out_here(self, prompt: str, agents: list[str],
                     budget: RunLimits | None = None, host: str = "") -> None: ...

    def refresh_run_state(self) -> None: ...

    def as_parent(self) -> QWidget: ...

#: Jobs listed in the menu (the newest).
MENU_JOBS = 15
_STATUS_WORDS = {"running": "running", "completed": "done", "cancelled": "stopped",
                 "failed": "failed", "interrupted": "interrupted"}


def job_label(job: FanOutJob, status: str) -> str:
    """"Summarise the diff · 3 agents · done": what the menu and the sidebar call a job."""
    agents = f"{len(job.members)} agent{'s' if len(job.members) != 1 else ''}"
    return f"{clip_line(job.prompt, 40)} · {agents} · {_STATUS_WORDS.get(status, status)}"


class JobWindows(QObject):
    """Owns the fan-out form, the job windows and the Jobs menu of one main window."""

    def __init__(self, window: JobHost, menu: QMenu) -> None:
        super().__init__(window.as_parent())
        self._window = window
        self.menu = menu
        #: job id -> its side-by-side view (started or reopened in this session)
        self.views: dict[str, FanOutView] = {}
        self.dialog: FanOutDialog | None = None
        self._jobs: list[tuple[FanOutJob, str]] = []
        self.set_jobs([])

    # -- the form -----------------------------------------------------------------------------
    def open_dialog(self) -> None:
        window = self._window
        if self.dialog is None:
            self.dialog = FanOutDialog(window.as_parent())
            self.dialog.fan_out_requested.connect(self._on_dialog_fan_out_requested)
            self.dialog.host_chosen.connect(self._on_dialog_host_chosen)
        self.dialog.set_hosts(window.sidebar.new_host_button.choices())
        self.refresh_agents()
        self.dialog.show()
        self.dialog.raise_()
        self.dialog.activateWindow()

    def refresh_agents(self) -> None:
        if self.dialog is not None:
            self.dialog.set_agents(self._agents_on(self.dialog.host()))

    def _agents_on(self, host: str) -> list[tuple[str, str, bool]]:
        """This computer's agents (the picker's list when the chat shown is here), or those
        found on ``host`` (with versions); not looked at yet: a look is asked for, and its
        agents stay choosable meanwhile (as in the picker)."""
        picker = self._window.header.agent_picker
        if not host and not picker.host:
            return agents_of(picker)
        rows = picker.menu_rows(host)
        if rows is None:
            picker.host_agents_requested.emit(host, False)
            rows = picker.menu_rows("") or []
            return [(r.agent, r.text.split(" — ")[0], True) for r in rows
                    if r.agent in picker.remote_agents()]
        return [(r.agent, r.text, r.usable) for r in rows if r.agent]

    def _on_dialog_host_chosen(self, _host: str) -> None:
        self.refresh_agents()

    def _on_dialog_fan_out_requested(self, prompt: str, agents: list[str],
                                     budget: RunLimits, host: str) -> None:
        self._window.fan_out_here(prompt, agents, budget, host)

    # -- job windows --------------------------------------------------------------------------
    def create_view(self, job: FanOutJob) -> FanOutView:
        window = self._window
        names = {m.agent: window.stack.agent_name(m.agent) for m in job.members}
        view = FanOutView(job, names, window.stop_hint(), window.as_parent())
        view.stop_requested.connect(window.stop_requested)
        view.stop_job_requested.connect(window.stop_job_requested)
        view.send_requested.connect(window.send_requested)
        view.queue_requested.connect(window.queue_requested)
        view.unqueue_requested.connect(window.unqueue_requested)
        view.queue_change_requested.connect(window.queue_change_requested)
        view.restart_requested.connect(window.restart_requested)
        view.permission_answer_requested.connect(window.permission_answer_requested)
        bridge = window.bridge()
        if bridge is not None:
            view.attach(bridge)
            # After the view's own slots: the window's run count then no longer has this run.
            bridge.run_finished.connect(window.refresh_run_state)
        self.views[job.job_id] = view
        return view

    def open_job(self, job_id: str) -> FanOutView | None:
        """Show a job's window again; a job of an earlier session gets a new one."""
        view = self.views.get(job_id)
        if view is None:
            found = next(((j, s) for j, s in self._jobs if j.job_id == job_id), None)
            if found is None:
                return None
            job, status = found
            view = self.create_view(job)
            view.set_status(status)
            for member in job.members:
                self._window.open_requested.emit(member.conversation_id)
        view.show()
        view.raise_()
        view.activateWindow()
        return view

    def running_streams(self) -> set[str]:
        streams: set[str] = set()
        for view in self.views.values():
            streams |= view.running_streams()
        return streams

    # -- the Jobs menu ------------------------------------------------------------------------
    def set_jobs(self, jobs: Sequence[tuple[FanOutJob, str]]) -> None:
        """Every stored job with its status, oldest first (as the store lists them)."""
        self._jobs = list(jobs)
        self.menu.clear()
        newest = list(reversed(self._jobs))[:MENU_JOBS]
        for job, status in newest:
            action = QAction(job_label(job, status), self.menu)
            # A prompt ("About this repo…") must not move to macOS's application menu.
            action.setMenuRole(QAction.MenuRole.NoRole)
            action.setToolTip(plain_tooltip(job.prompt[:500]))  # prompt text, never markup
            action.setData(job.job_id)
            action.triggered.connect(lambda _c=False, j=job.job_id: self.open_job(j))
            self.menu.addAction(action)
        if not newest:
            empty = self.menu.addAction("No jobs yet (Ask several agents…)")
            empty.setEnabled(False)
            empty.setMenuRole(QAction.MenuRole.NoRole)

    def jobs(self) -> list[tuple[FanOutJob, str]]:
        return list(self._jobs)

    def job_of(self, conversation_id: int) -> FanOutJob | None:
        return next((j for j, _s in self._jobs
                     if any(m.conversation_id == conversation_id for m in j.members)), None)
