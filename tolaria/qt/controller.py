"""The window's chat controller: the window's intents to the turn engine, its facts to signals.

A turn's whole life (plan, record, reserve, checkpoints, run, stop, restart, retry, queue,
delete while running, after-finish, shutdown) is the Qt-free ``TurnEngine``'s
(tolaria/chats/engine/), the same one ``tolaria run`` drives; this controller builds it for the
window, with the bridge's stream gate (batched per loop turn), the bridge's observer (every fact
becomes a signal), the chats' kept agent processes (docs/adr/0009) and the permission broker
(tolaria/qt/permissions.py), which asks a running turn's questions in the chat. What stays here
is the window's own: opening a chat (its newest page, markers, queue and changes), the diff
review and Revert / Rewind / Undo (tolaria/qt/checkpoint_control.py), and agent detection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtCore import QObject

from tolaria.chats.engine import TurnEngine
from tolaria.chats.engine.limits import JobBudget
from tolaria.chats.inflight import Launch, MessageQueues, QueuedMessage
from tolaria.chats.review import TurnReview
from tolaria.chats.run_config import RunConfig
from tolaria.chats.service import ChatService
from tolaria.core.adapters.manifest import AdapterSet
from tolaria.core.attachments.model import Attachment
from tolaria.core.limits import RunLimits
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.programs import discovery
from tolaria.core.store.db import Conversation, Store, Turn
from tolaria.core.store.pages import FIRST_PAGE_TURNS
from tolaria.core.turns.keeper import KeeperPool
from tolaria.core.turns.runner import DEFAULT_GRACE_S, DEFAULT_RETRY_LIMIT_S
from tolaria.qt.bridge import Bridge, BridgeObserver
from tolaria.qt.checkpoint_control import CheckpointControl
from tolaria.qt.permissions import PermissionBroker
from tolaria.qt.tasks import TaskSet


class ChatController(CheckpointControl, QObject):
    def __init__(self, bridge: Bridge, store: Store, registry: ProcessRegistry,
                 adapters: AdapterSet, tasks: TaskSet, *, grace_s: float = DEFAULT_GRACE_S,
                 retry_limit_s: float = DEFAULT_RETRY_LIMIT_S,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.store = store
        self.registry = registry
        self.adapters = adapters
        self.tasks = tasks
        #: Permission questions of running turns, answered in the chat.
        self.permissions = PermissionBroker(bridge, store)
        #: Each chat's kept agent process (docs/adr/0009): closed when the chat is deleted, when
        #: its agent or folder changes, after an idle timeout, and at shutdown.
        self.keepers = KeeperPool(grace_s=grace_s)
        self.engine = TurnEngine(store, registry, BridgeObserver(bridge), tasks,
                                 adapters=adapters, gate=bridge.gate, grace_s=grace_s,
                                 retry_limit_s=retry_limit_s, keepers=self.keepers,
                                 permissions=self.permissions)
        #: The chat rules shared with ``tolaria run``: titles, history, the resume decision.
        self.chats: ChatService = self.engine.service
        #: Messages queued behind running turns, kept in the store.
        self.queues: MessageQueues = self.engine.queue_store
        assert self.engine.checkpoints is not None
        #: Git snapshots before and after each turn.
        self.checkpoints = self.engine.checkpoints
        #: A changed file's diff, hunk by hunk, with Accept / Revert (tolaria/chats/review.py).
        self.review = TurnReview(self.checkpoints)

    # -- settings the window changes --------------------------------------------------------------
    @property
    def grace_s(self) -> float:
        return self.engine.grace_s

    @grace_s.setter
    def grace_s(self, value: float) -> None:
        self.engine.grace_s = value

    @property
    def retry_limit_s(self) -> float:
        """``[behaviour] retry_limit_seconds``: how long an agent may retry before it is stopped."""
        limit = self.engine.retry_limit_s
        return DEFAULT_RETRY_LIMIT_S if limit is None else limit

    @retry_limit_s.setter
    def retry_limit_s(self, value: float) -> None:
        self.engine.retry_limit_s = value

    @property
    def run_config(self) -> RunConfig:
        """Preferences (agent overrides, polite window) applied to each new run."""
        return self.engine.run_config

    @property
    def _launches(self) -> Mapping[str, Launch]:
        return self.engine.launches

    # -- queries --------------------------------------------------------------------------------
    def running_stream(self, conversation_id: int) -> str | None:
        return self.engine.running_stream(conversation_id)

    def running_count(self) -> int:
        return self.engine.running_count()

    def conversations(self) -> list[Conversation]:
        return self.store.list_conversations()

    def answered_turns(self, conversation_id: int) -> list[Turn]:
        """The conversation's turns without the abandoned (restarted) attempts."""
        return self.engine.answered_turns(conversation_id)

    @staticmethod
    def keep_key(conversation_id: int) -> str:
        """The key of a conversation's kept agent process."""
        return TurnEngine.keep_key(conversation_id)

    # -- runs -----------------------------------------------------------------------------------
    def send(self, conversation_id: int, prompt: str, *, delivering: Sequence[int] = (),
             budget: JobBudget | None = None) -> str | None:
        """Start a turn (``TurnEngine.send``); its stream id, or None when it did not start."""
        return self.engine.send(conversation_id, prompt, delivering=delivering, budget=budget)

    def send_attached(self, conversation_id: int, prompt: str,
                      attachments: Sequence[Attachment]) -> str | None:
        """Start a turn with attachments (ADR 0028); None when it did not start (refused).
        While the chat's turn runs, the message is queued with them (sent when it ends)."""
        if self.engine.running_stream(conversation_id) is not None:
            self.engine.queue(conversation_id, prompt, tuple(attachments))
            return None
        return self.engine.send(conversation_id, prompt, attachments=tuple(attachments))

    def stop(self, conversation_id: int) -> bool:
        """Stop the conversation's running turn (returns at once; ``run_finished`` follows)."""
        return self.engine.stop(conversation_id)

    def restart(self, conversation_id: int) -> bool:
        return self.engine.restart(conversation_id)

    def retry(self, conversation_id: int, stream_id: str, prompt: str) -> str | None:
        return self.engine.retry(conversation_id, stream_id, prompt)

    def stop_all(self) -> list[str]:
        return self.engine.stop_all()

    def answer_permission(self, stream_id: str, key: str, option_id: str) -> bool:
        """The user answered a permission question of a running turn."""
        return self.permissions.answer(stream_id, key, option_id)

    async def shutdown(self) -> None:
        """Stop every run and wait until their trees are gone; end the other tasks."""
        await self.engine.shutdown()

    async def detect_agents(self) -> None:
        found = await discovery.detect_all(list(self.adapters.manifests.values()))
        self.bridge.agents_detected.emit(found)

    # -- queued messages --------------------------------------------------------------------------
    def queue(self, conversation_id: int, text: str) -> QueuedMessage | None:
        return self.engine.queue(conversation_id, text)

    def unqueue(self, conversation_id: int, message_id: int) -> QueuedMessage | None:
        return self.engine.unqueue(conversation_id, message_id)

    def change_queue(self, conversation_id: int, change: object) -> bool:
        return self.engine.change_queue(conversation_id, change)

    def restore_queues(self) -> list[int]:
        return self.engine.restore_queues()

    def pause_queues_at_quit(self) -> None:
        self.engine.pause_queues_at_quit()

    # -- chats ----------------------------------------------------------------------------------
    def load(self) -> list[Conversation]:
        """Announce every stored conversation (after pausing the queues a crash left)."""
        return self.engine.load()

    def new_conversation(self, agent: str, cwd: str | None,
                         host: str | None = None) -> Conversation:
        return self.engine.new_conversation(agent, cwd, host=host or None)

    def open_conversation(self, conversation_id: int) -> None:
        """Send the newest page of a conversation's stored turns to its (new) view; the view
        asks for older pages as the user scrolls (tolaria/qt/pages.py)."""
        self.bridge.history_loaded.emit(conversation_id, self.store.turns_page(
            conversation_id, limit=FIRST_PAGE_TURNS))
        self.bridge.markers_loaded.emit(conversation_id, self.store.markers(conversation_id))
        self.engine.announce_queue(conversation_id)
        self.engine.open_changes(conversation_id)

    def rename(self, conversation_id: int, title: str) -> None:
        self.engine.rename(conversation_id, title)

    def set_chat_limits(self, conversation_id: int, limits: RunLimits) -> None:
        """A chat's own limits, from its next run on (Run → Chat limits…)."""
        self.engine.set_chat_limits(conversation_id, limits)

    def set_agent(self, conversation_id: int, agent: str) -> None:
        self.engine.set_agent(conversation_id, agent)

    def set_cwd(self, conversation_id: int, cwd: str) -> None:
        self.engine.set_cwd(conversation_id, cwd)

    def set_host(self, conversation_id: int, host: str) -> None:
        """Run the chat's next turns on ``host`` ("" for this computer) in the host's home
        folder (a remote chat's folder is typed afterwards); refused while a turn runs."""
        refusal = self.engine.set_host(conversation_id, host or None, None)
        if refusal is not None:
            self.engine.observer.problem_reported(refusal)

    def set_keep_running(self, conversation_id: int, keep: bool) -> None:
        """The chat's "keep running when disconnected" on its host, from its next turn on."""
        self.engine.set_keep_running(conversation_id, keep)

    def delete(self, conversation_id: int) -> None:
        """Delete a conversation; a running turn is stopped (tree gone) first."""
        self.engine.delete(conversation_id)
