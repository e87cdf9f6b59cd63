"""The chat panes, one per opened conversation, and the routing of run facts to them.

Each pane receives only the facts of its own stream ids: the stack keeps stream id -> pane, so
switching conversations never stops or mixes runs, and a hidden pane keeps its run going.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QStackedWidget, QWidget

from tolaria.chats.checkpoints import TurnChanges
from tolaria.chats.inflight import QueueState
from tolaria.chats.review import FileReview
from tolaria.config.settings import DEFAULT_WATCHDOG_S
from tolaria.core.store.db import Conversation, Turn
from tolaria.core.store.pages import TurnPage
from tolaria.ui.chat.chat_pane import ChatPane
from tolaria.ui.chat.stream_routing import PaneRouting


class ChatStack(PaneRouting, QStackedWidget):
    #: Send a prompt: conversation id, prompt.
    send_requested = Signal(int, str)
    #: Stop the conversation's running turn: conversation id.
    stop_requested = Signal(int)
    #: A pane was created and needs its stored transcript: conversation id.
    open_requested = Signal(int)
    #: Queue a message behind the running turn: conversation id, text.
    queue_requested = Signal(int, str)
    #: Take a queued message back: conversation id, message id.
    unqueue_requested = Signal(int, int)
    #: Reorder, edit, send now, pause or resume a queue: conversation id, QueueChange.
    queue_change_requested = Signal(int, object)
    #: Revert a file of a turn, or rewind to before it: conversation id, UndoRequest.
    undo_requested = Signal(int, object)
    #: Abandon the running turn and re-run its prompt: conversation id.
    restart_requested = Signal(int)
    #: Answer a permission question of a running turn: stream id, question key, option id.
    permission_answer_requested = Signal(str, str, str)
    #: A transcript wants a page of stored turns: conversation id, page kind, turn id.
    page_requested = Signal(int, str, int)
    #: Find text in a chat's stored turns: conversation id, text.
    search_requested = Signal(int, str)
    #: Run a prompt in place of an ended turn: conversation id, stream id, prompt.
    retry_requested = Signal(int, str, str)
    #: Check and store files for a chat's next message: conversation id, AttachIntent.
    attach_requested = Signal(int, object)
    #: Send a prompt with attachments: conversation id, prompt, tuple of Attachment.
    send_attached_requested = Signal(int, str, object)
    #: Run one of Tolaria's commands chosen in a composer's ``/`` menu: conversation id, name.
    command_requested = Signal(int, str)
    #: A composer's text changed (the chat's draft): conversation id, text.
    draft_changed = Signal(int, str)

    def __init__(self, stop_hint: str, parent: QWidget | None = None, *,
                 watchdog_seconds: float = DEFAULT_WATCHDOG_S) -> None:
        super().__init__(parent)
        self._watchdog_seconds = watchdog_seconds
        self._panes: dict[int, ChatPane] = {}
        self._pane_of_stream: dict[str, ChatPane] = {}
        self._agent_names: dict[str, str] = {}
        self._no_images: frozenset[str] = frozenset()
        self._stop_hint = stop_hint
        self._send_key = "Enter"
        #: The stored draft of a chat (set by the app: tolaria/qt/drafts.py).
        self.draft_of: Callable[[int], str] = lambda _conversation_id: ""

    # -- panes ----------------------------------------------------------------------------------
    def set_agent_names(self, names: dict[str, str],
                        no_images: Collection[str] = ()) -> None:
        """The agents' names; ``no_images``: the agents whose manifest takes no images."""
        self._agent_names = dict(names)
        self._no_images = frozenset(no_images)

    def agent_name(self, agent: str) -> str:
        return self._agent_names.get(agent, agent)

    def set_stop_hint(self, hint: str) -> None:
        self._stop_hint = hint
        for pane in self._panes.values():
            pane.set_stop_hint(hint)

    def set_send_key(self, key: str) -> None:
        self._send_key = key
        for pane in self._panes.values():
            pane.composer.set_send_key(key)

    def set_watchdog_seconds(self, seconds: float) -> None:
        self._watchdog_seconds = seconds
        for pane in self._panes.values():
            pane.watchdog.set_seconds(seconds)

    def show_conversation(self, conversation: Conversation) -> ChatPane:
        pane = self._panes.get(conversation.id)
        if pane is None:
            pane = ChatPane(conversation.id, self.agent_name(conversation.agent),
                            self._stop_hint, self, watchdog_seconds=self._watchdog_seconds)
            pane.composer.set_send_key(self._send_key)
            pane.send_requested.connect(self.send_requested)
            pane.stop_requested.connect(self.stop_requested)
            pane.queue_requested.connect(self.queue_requested)
            pane.unqueue_requested.connect(self.unqueue_requested)
            pane.queue_change_requested.connect(self.queue_change_requested)
            pane.undo_requested.connect(self.undo_requested)
            pane.restart_requested.connect(self.restart_requested)
            pane.permission_answer_requested.connect(self.permission_answer_requested)
            pane.page_requested.connect(self.page_requested)
            pane.search_requested.connect(self.search_requested)
            pane.retry_requested.connect(self.retry_requested)
            pane.attach_requested.connect(self.attach_requested)
            pane.send_attached_requested.connect(self.send_attached_requested)
            pane.composer.setPlainText(self.draft_of(conversation.id))
            pane.command_requested.connect(self.command_requested)
            pane.draft_changed.connect(self.draft_changed)
            self._panes[conversation.id] = pane
            self.addWidget(pane)
            self.open_requested.emit(conversation.id)
        pane.set_chat_context(mention_folder(conversation), conversation.agent,
                              self.agent_name(conversation.agent),
                              takes_images=conversation.agent not in self._no_images,
                              host=conversation.host or "")
        self.setCurrentWidget(pane)
        return pane

    def on_attachment_settled(self, conversation_id: int, settled: object) -> None:
        pane = self._panes.get(conversation_id)
        if pane is not None:
            pane.attachments.settle(settled)  # type: ignore[arg-type]

    def pane(self, conversation_id: int) -> ChatPane | None:
        return self._panes.get(conversation_id)

    def current_pane(self) -> ChatPane | None:
        widget = self.currentWidget()
        return widget if isinstance(widget, ChatPane) else None

    def conversation_changed(self, conversation: Conversation) -> None:
        pane = self._panes.get(conversation.id)
        if pane is not None:
            pane.set_chat_context(mention_folder(conversation), conversation.agent,
                                  self.agent_name(conversation.agent),
                                  takes_images=conversation.agent not in self._no_images,
                                  host=conversation.host or "")
        if pane is not None and pane.running_stream is None:
            pane.set_agent_name(self.agent_name(conversation.agent))

    def remove(self, conversation_id: int) -> None:
        pane = self._panes.pop(conversation_id, None)
        if pane is None:
            return
        for stream_id, owner in list(self._pane_of_stream.items()):
            if owner is pane:
                del self._pane_of_stream[stream_id]
        self.removeWidget(pane)
        pane.deleteLater()

    def running_count(self) -> int:
        return len(self._pane_of_stream)

    def running_streams(self) -> set[str]:
        return set(self._pane_of_stream)

    def is_running(self, conversation_id: int) -> bool:
        pane = self._panes.get(conversation_id)
        return pane is not None and pane.running_stream is not None

    # -- facts from the bridge ----------------------------------------------------------------
    def on_run_started(self, stream_id: str, conversation_id: int, turn: Turn) -> None:
        pane = self._panes.get(conversation_id)
        if pane is None:
            return
        self._pane_of_stream[stream_id] = pane
        pane.run_started(stream_id, turn, self.agent_name(turn.agent))

    def adopt_run(self, stream_id: str, conversation_id: int) -> None:
        """Route a run that started while this conversation had no pane here (fan-out jobs)."""
        pane = self._panes.get(conversation_id)
        if pane is not None and stream_id not in self._pane_of_stream and pane.adopt_run(stream_id):
            self._pane_of_stream[stream_id] = pane

    def on_page_loaded(self, page: TurnPage) -> None:
        pane = self._panes.get(page.conversation_id)
        if pane is not None:
            pane.load_page(page, self._agent_names)

    def on_search_finished(self, conversation_id: int, text: str, turn_ids: list[int]) -> None:
        pane = self._panes.get(conversation_id)
        if pane is not None:
            pane.show_matches(text, turn_ids)

    def on_queue_changed(self, conversation_id: int, state: QueueState) -> None:
        pane = self._panes.get(conversation_id)
        if pane is not None:
            pane.set_queue(state)

    def on_turn_changes_changed(self, conversation_id: int,
                                changes: Sequence[TurnChanges]) -> None:
        pane = self._panes.get(conversation_id)
        if pane is not None:
            pane.set_turn_changes(changes)

    def on_file_review_loaded(self, conversation_id: int, review: FileReview) -> None:
        pane = self._panes.get(conversation_id)
        if pane is not None:
            pane.show_file_review(review)

    def on_turn_restarted(self, conversation_id: int, old_stream: str, _new_stream: str) -> None:
        pane = self._panes.get(conversation_id)
        if pane is not None:
            pane.turn_restarted(old_stream)


def mention_folder(conversation: Conversation) -> str | None:
    """The chat's folder as ``@`` lists it: here, or a path on the chat's host (listed there);
    None for a chat on a host without a folder (its home there is not offered)."""
    return conversation.cwd or None


def local_folder(conversation: Conversation) -> str | None:
    """The chat's folder on this machine (what ``@`` lists); None for a chat on another host,
    whose folder is not here."""
    return None if conversation.host else conversation.cwd
