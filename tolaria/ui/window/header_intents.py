"""What the chat header asks of the window: another agent, folder or host for the current chat,
and its "keep running when disconnected" (a base of :class:`tolaria.ui.window.main_window.
MainWindow`, which provides the header, the chat stack and the current chat)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Signal

from tolaria.ui.window.window_keys import WindowKeys

if TYPE_CHECKING:
    from tolaria.ui.chat.chat_pane import ChatPane
    from tolaria.ui.chat.header import ChatHeader


class HeaderIntents(WindowKeys):
    """The header's intents, turned into the window's (the current chat's id added)."""

    #: Use another agent in a conversation: id, agent id.
    agent_change_requested = Signal(int, str)
    #: Use another working folder in a conversation: id, path.
    cwd_change_requested = Signal(int, str)
    #: Run a conversation's turns on another host: id, destination ("" for this computer).
    host_change_requested = Signal(int, str)
    #: The current chat's "keep running when disconnected" switched (conversation id, on).
    keep_running_change_requested = Signal(int, bool)

    header: ChatHeader

    def current_pane(self) -> ChatPane | None:  # provided by the main window
        raise NotImplementedError

    def _on_header_agent_change_requested(self, agent: str) -> None:
        conversation_id = self.current_conversation_id()
        if conversation_id is not None:
            self.agent_change_requested.emit(conversation_id, agent)

    def _on_header_cwd_change_requested(self, path: str) -> None:
        conversation_id = self.current_conversation_id()
        if conversation_id is not None:
            self.cwd_change_requested.emit(conversation_id, path)

    def _on_header_keep_running_change_requested(self, keep: bool) -> None:
        conversation_id = self.current_conversation_id()
        if conversation_id is not None:
            self.keep_running_change_requested.emit(conversation_id, keep)

    def _on_header_host_change_requested(self, host: str, agent: str = "") -> None:
        """Another host (and with ``agent``, picked under a host in its menu, that agent)."""
        pane = self.current_pane()
        if pane is None or (host == self.header.host and not agent):
            return
        if pane.running_stream is not None:  # its agent stays where it runs
            self.header.show_host_error("Stop the running turn before changing the host: it "
                                        "keeps running where it is.")
            return
        if host != self.header.host:
            self.host_change_requested.emit(pane.conversation_id, host)
        if agent:
            self.agent_change_requested.emit(pane.conversation_id, agent)
