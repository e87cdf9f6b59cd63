"""The composition root: QApplication, the asyncio loop, wiring, and an orderly shutdown.

Shutdown order matters (see STYLE.md): the app does not quit when its window closes; ``main``
waits for the window's ``closed`` fact, then stops every run (trees gone, pipes closed), closes
the control socket and the store, and only then returns and lets the loop end.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtWidgets import QApplication

from tolaria import __version__
from tolaria.app.prefs import Preferences
from tolaria.chats import usage
from tolaria.chats.attachments import AttachmentDesk
from tolaria.chats.drafts import FILE_NAME as DRAFTS_FILE
from tolaria.chats.ui_state import FILE_NAME as UI_STATE_FILE
from tolaria.chats.ui_state import UiState
from tolaria.config.settings import load_settings, settings_path
from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.limits import RunLimits
from tolaria.core.process import control
from tolaria.core.process.control import ControlServer
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import Store
from tolaria.qt import loop
from tolaria.qt.askpass_control import AskpassControl
from tolaria.qt.attach_control import AttachControl
from tolaria.qt.bridge import Bridge
from tolaria.qt.compat import protect_singletons
from tolaria.qt.controller import ChatController
from tolaria.qt.drafts import DraftKeeper
from tolaria.qt.export_control import ChatExport
from tolaria.qt.fanout import FanOutController
from tolaria.qt.mention_source import shared_source
from tolaria.qt.notify.control import NotificationController
from tolaria.qt.pages import PageLoader
from tolaria.qt.session_import import SessionImport
from tolaria.qt.settings_controller import SettingsController
from tolaria.qt.tasks import TaskSet
from tolaria.qt.worktree_control import WorktreeControl
from tolaria.support import crash, paths, platforms
from tolaria.ui import theme
from tolaria.ui.window.main_window import MainWindow

log = logging.getLogger(__name__)

DEFAULT_AGENT = "demo"


class Tolaria:
    """Everything one window needs, built in dependency order; ``start``/``shutdown`` are async."""

    def __init__(self, *, agent: str | None = None, cwd: str | None = None,
                 grace_s: float | None = None, store_path: Path | None = None) -> None:
        self.settings, problems = load_settings()
        broken_file = settings_path() if problems else None
        self.adapters = load_adapters()
        problems += [f"broken adapter manifest: {e}" for e in self.adapters.errors]
        problems += crash.unseen_notice("gui")  # a crash report left by the last run
        refusal = platforms.run_refusal()
        if refusal is not None:  # Windows: said from the start, and again at each Send
            problems.append(refusal)
        self.preselect = agent is not None or cwd is not None
        self.default_agent = DEFAULT_AGENT
        if agent is not None:
            if agent in self.adapters.manifests:
                self.default_agent = agent
            else:
                problems.append(f"--agent {agent!r} is not a known agent; using "
                                f"{DEFAULT_AGENT!r} (known: "
                                f"{', '.join(sorted(self.adapters.manifests))})")
        self.default_cwd = os.getcwd()
        if cwd is not None:
            if os.path.isdir(cwd):
                self.default_cwd = os.path.abspath(cwd)
            else:
                problems.append(f"--cwd {cwd!r} is not a folder; using {self.default_cwd}")
        self.registry = ProcessRegistry()
        # Turns another Tolaria process (`tolaria run`) streams now are not crashed ones.
        self.store = Store(store_path, live_elsewhere=control.live_stream_ids())
        self.tasks = TaskSet()
        data_dir = store_path.parent if store_path is not None else paths.data_dir()
        self.drafts = DraftKeeper(data_dir / DRAFTS_FILE)
        #: The window's own state across restarts (the sidebar's folded hosts).
        self.ui_state = UiState(data_dir / UI_STATE_FILE)
        self.bridge = Bridge()
        self.bridge.watch_store(self.store)  # a full disk is said in the window
        self.controller = ChatController(self.bridge, self.store, self.registry, self.adapters,
                                         self.tasks,
                                         grace_s=grace_s if grace_s is not None
                                         else self.settings.grace_seconds,
                                         retry_limit_s=self.settings.retry_limit_seconds)
        self.settings_controller = SettingsController(self.adapters, self.tasks, self.settings,
                                                      self.registry)
        # A file that does not parse is reported by both readers: say it once.
        said = {p.split(": ", 1)[0] for p in problems}
        problems += [p for p in self.settings_controller.override_problems
                     if p.split(": ", 1)[0] not in said]
        self.fanout = FanOutController(self.bridge, self.store, self.controller)
        self.pages = PageLoader(self.bridge, self.store)
        self.session_import = SessionImport(self.bridge, self.store, self.tasks,
                                            reload=self.controller.open_conversation)
        self.worktrees = WorktreeControl(self.bridge, self.store, self.tasks)
        self.chat_export = ChatExport(self.bridge, self.store, self.tasks)
        self.attaching = AttachControl(self.bridge, AttachmentDesk(
            self.store, limits=self.settings.attach_limits()), self.tasks)
        self.control = ControlServer(self.registry, details=self._stream_details)
        #: ssh's own questions answered in the window (ADR 0033).
        self.askpass = AskpassControl(self.bridge)
        self.controller.engine.ssh_askpass = self.askpass.env_for
        self.window = MainWindow(self.settings, problems, default_agent=self.default_agent,
                                 default_cwd=self.default_cwd)
        if broken_file is not None:
            self.window.offer_to_open(broken_file)
        self.window.attach(self.bridge)
        self.window.kept_at_quit = self.controller.engine.kept_at_quit  # the quit box (ADR 0032)
        self.notifications = NotificationController(
            self.bridge, self.store, self.controller, self.tasks, self.settings,
            window=self.window, icon=theme.app_icon(), in_view=self._in_view,
            current_chat=self.window.current_conversation_id,
            open_chat=self._open_from_notification)
        self.preferences = Preferences(self.window, self.controller, self.settings_controller,
                                       self.tasks)
        self.preferences.show_manifests()
        # A look at a host's agents may ask ssh's questions too: in the chat shown when it is on
        # that host, else in a dialog (ADR 0033, 0034).
        self.preferences.hosts.askpass = self.askpass.env_for
        self.preferences.hosts.asker = self._asker_of_look
        # So may the listing of a remote chat's folder for ``@`` (ADR 0035).
        shared_source().askpass = self.askpass.env_for
        shared_source().asker = self._asker_of_look
        # And an import of a host's sessions (File → Import sessions from).
        self.session_import.askpass = self.askpass.env_for
        # The fan-out form lists the chosen host's agents: a look's answer refreshes it.
        self.preferences.hosts.host_agents_found.connect(
            lambda _host, _found: self.window.jobs.refresh_agents())
        if grace_s is not None:  # the command line (and tests) win over the settings file
            self.controller.grace_s = grace_s
        self._wire()
        self._closed: asyncio.Future[None] | None = None
        self._control_started = False

    def _asker_of_look(self, host: str) -> int:
        shown = self.window.current_conversation_id()
        on_host = host and self.window.header.agent_picker.host == host
        return shown if shown is not None and on_host else 0

    def _wire(self) -> None:
        w, c = self.window, self.controller
        w.new_chat_requested.connect(self._on_window_new_chat_requested)
        w.open_requested.connect(c.open_conversation)
        w.page_requested.connect(self.pages.load)
        w.search_requested.connect(self.pages.search)
        w.retry_requested.connect(c.retry)
        w.send_requested.connect(c.send)
        w.send_attached_requested.connect(c.send_attached)
        w.attach_requested.connect(self.attaching.attach)
        w.stop_requested.connect(c.stop)
        w.stop_all_requested.connect(c.stop_all)
        w.queue_requested.connect(c.queue)
        w.unqueue_requested.connect(c.unqueue)
        w.queue_change_requested.connect(c.change_queue)
        w.undo_requested.connect(c.undo)
        w.restart_requested.connect(c.restart)
        w.permission_answer_requested.connect(c.answer_permission)
        w.rename_requested.connect(c.rename)
        w.chat_limits_requested.connect(c.set_chat_limits)
        w.delete_requested.connect(c.delete)
        w.agent_change_requested.connect(c.set_agent)
        w.cwd_change_requested.connect(c.set_cwd)
        w.host_change_requested.connect(c.set_host)
        w.ssh_questions.answer_requested.connect(self.askpass.answer)
        w.ssh_questions.refusal_requested.connect(self.askpass.refuse)
        w.keep_running_change_requested.connect(c.set_keep_running)
        w.fan_out_requested.connect(self._on_window_fan_out_requested)
        w.stop_job_requested.connect(self.fanout.stop_job)
        w.import_requested.connect(self.session_import.start)
        w.import_from_host_requested.connect(self.session_import.start_on_host)
        w.import_cancel_requested.connect(self.session_import.cancel)
        w.export_requested.connect(self.chat_export.start)
        w.usage_requested.connect(self._on_window_usage_requested)
        self.bridge.run_finished.connect(self._on_bridge_run_finished)
        w.new_worktree_chat_requested.connect(self._on_window_new_worktree_chat_requested)
        w.remove_worktree_requested.connect(self.worktrees.remove_with)
        self.bridge.conversation_deleted.connect(self.worktrees.on_conversation_deleted)
        w.stack.draft_of = self.drafts.draft
        w.sidebar.restore_folded_hosts(self.ui_state.folded_hosts)
        w.sidebar.folding_changed.connect(self.ui_state.set_folded_hosts)
        w.stack.draft_changed.connect(self.drafts.on_draft_changed)
        self.bridge.conversation_deleted.connect(self.drafts.on_conversation_deleted)
        self.bridge.job_changed.connect(self._on_bridge_job_changed)
        w.closed.connect(self._on_window_closed)
        self.notifications.pending_changed.connect(w.set_pending_questions)
        self.settings_controller.settings_saved.connect(self.notifications.configure)
        self.settings_controller.settings_saved.connect(self.attaching.configure)
        w.conversation_shown.connect(self.notifications.chat_shown)

    def _stream_details(self, stream_id: str) -> dict[str, object]:
        """What ``tolaria streams`` lists with a run of this window: its chat's title, and its
        host for a chat on another machine."""
        turn = self.store.turn_by_stream(stream_id)
        conversation = self.store.get_conversation(turn.conversation_id) if turn else None
        if conversation is None:
            return {}
        if conversation.host:
            return {"chat": conversation.title, "host": conversation.host}
        return {"chat": conversation.title}

    def _in_view(self, conversation_id: int) -> bool:
        """The chat is the one shown in the active, not minimized window: no notification."""
        w = self.window
        return (w.current_conversation_id() == conversation_id and w.isActiveWindow()
                and not w.isMinimized())

    def _open_from_notification(self, conversation_id: int) -> None:
        """The user clicked a notification: the chat comes forward (their own choice)."""
        self.window.open_conversation(conversation_id)
        self.window.showNormal()
        self.window.raise_()
        self.window.activateWindow()

    def _on_window_new_chat_requested(self, agent: str, cwd: str, host: str = "") -> None:
        if host:  # a folder there (or the host's home); nothing of this machine applies
            self.controller.new_conversation(agent, cwd or None, host=host)
            return
        # The agent's default working folder (Preferences) wins for a new chat.
        self.controller.new_conversation(agent, self.settings_controller.default_cwd(agent) or cwd)

    def _on_window_new_worktree_chat_requested(self, agent: str, cwd: str) -> None:
        self.worktrees.new_chat(agent, self.settings_controller.default_cwd(agent) or cwd)

    def _on_window_usage_requested(self, by: str, days: int) -> None:
        """The Usage page's figures: a few indexed sums over the turns (milliseconds for
        20,000 turns: bench/bench_usage.py), read on the GUI thread."""
        since = usage.since_of(f"{days}d") if days > 0 else None
        names = {m.id: m.name for m in self.adapters.manifests.values()}
        self.window.show_usage(usage.report(self.store, by, since), names)

    def _on_bridge_run_finished(self, *_: object) -> None:
        """A run ended: an open Usage page counts it at once."""
        page = self.window.usage_window
        if page is not None and page.isVisible():
            page.request()

    def _on_window_fan_out_requested(self, prompt: str, agents: list[str], cwd: str,
                                     budget: RunLimits, host: str = "") -> None:
        names = {m.id: m.name for m in self.adapters.manifests.values()}
        self.fanout.start_job(prompt, agents, cwd, names, budget=budget, host=host)

    async def start(self) -> None:
        """Listen for ``tolaria streams``/``abort``, show the window, open a conversation."""
        try:
            if platforms.control_channel():  # not on Windows yet: runs are refused there too
                await self.control.start()
                self._control_started = True
        except OSError as exc:
            self.bridge.problem_reported.emit(f"control socket unavailable: {exc}")
        await self.askpass.start()
        conversations = self.controller.load()
        self.worktrees.load()
        self.show_jobs()
        latest = conversations[0] if conversations else None
        if latest is None or (self.preselect and self.store.turns(latest.id)):
            latest = self.controller.new_conversation(self.default_agent, self.default_cwd)
        elif self.preselect:
            self.controller.set_agent(latest.id, self.default_agent)
            self.controller.set_cwd(latest.id, self.default_cwd)
        self.notifications.start()
        self.window.show()
        self.window.open_conversation(latest.id)
        self.tasks.spawn(self.preferences.detect_agents(), name="detect-agents")
        # Everything made so far (modules, Qt's wrappers, lexers) lives as long as the app: out
        # of the collector's sight, a full collection no longer walks it (one took 45-145 ms
        # on the GUI thread while a long chat was scrolled; ADR 0037). Once per process: a
        # frozen cycle is never collected, and tests start many apps.
        if not gc.get_freeze_count():
            gc.freeze()

    def _on_bridge_job_changed(self, *_: object) -> None:
        self.show_jobs()

    def show_jobs(self) -> None:
        """The stored jobs to the window (Run → Jobs, the sidebar's job groups)."""
        self.window.set_jobs([(job, self.fanout.status(job.job_id))
                              for job in self.fanout.jobs()])

    def _on_window_closed(self) -> None:
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    async def wait_closed(self) -> None:
        if not self.window.isVisible():
            return
        self._closed = asyncio.get_running_loop().create_future()
        await self._closed

    async def shutdown(self) -> None:
        """Stop every run and wait for their trees to be gone, then close socket and store."""
        self.preferences.close()
        await self.preferences.hosts.aclose()  # no look at a host left running
        await self.session_import.aclose()  # nor an import from a host
        self.window.hide()
        for view in self.window.fan_out_views.values():
            view.hide()
        try:
            await self.notifications.aclose()
            await self.controller.shutdown()
        finally:
            if self._control_started:
                await self.control.close()
            await self.askpass.close()
            self.store.close()
            self.drafts.close()
            shared_source().shutdown()


async def main(agent: str | None = None, cwd: str | None = None) -> int:
    app = Tolaria(agent=agent, cwd=cwd)
    running = asyncio.get_running_loop()
    running.set_exception_handler(crash.asyncio_handler)
    # No add_signal_handler on Windows event loops (NotImplementedError): Ctrl+C in the
    # terminal there is Python's KeyboardInterrupt, and a run never starts (ADR 0014).
    signals = () if sys.platform == "win32" else (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        running.add_signal_handler(sig, app.window.force_close)
    try:
        await app.start()
        await app.wait_closed()
    finally:
        for sig in signals:
            running.remove_signal_handler(sig)
        await app.shutdown()
    return 0


def make_qapplication(argv: Sequence[str] | None = None) -> QApplication:
    protect_singletons()
    existing = QApplication.instance()
    qapp = existing if isinstance(existing, QApplication) else QApplication(
        list(argv) if argv is not None else sys.argv[:1])
    qapp.setApplicationName("Tolaria")
    qapp.setApplicationVersion(__version__)
    qapp.setDesktopFileName("tolaria")
    qapp.setWindowIcon(theme.app_icon())
    # We quit when *we* have stopped every run, not when the last window closes.
    qapp.setQuitOnLastWindowClosed(False)
    return qapp


def run(agent: str | None = None, cwd: str | None = None) -> int:
    """``tolaria`` with no subcommand."""
    logging.basicConfig(level=logging.WARNING, format="tolaria: %(levelname)s %(name)s: %(message)s")
    crash.install("gui")
    make_qapplication()
    return loop.run(main(agent, cwd))
