"""The application rules of one chat turn, for the window and ``tolaria run`` alike (both through
the turn engine, tolaria/chats/engine/): which earlier turns count, what the agent is
sent, whether its own session is resumed, and the title a chat gets from its first prompt.

The resume rule: continue the agent's own session when its adapter can (Claude ``--resume``,
Codex's ``resume_command``; a model chat's history saved by Tolaria) and the chat's last answered
turn ran in that session with the same agent; it keeps the whole context, tools included, so the
prompt goes alone. The window also continues the session its kept agent process holds (docs/adr/
0009); ``tolaria run`` keeps no process. Otherwise the earlier turns travel in the prompt as the
"Previous conversation:" preamble (tolaria/chats/history.py), bounded in bytes for argv.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from tolaria.chats.history import answered_turns, build_prompt, exchanges, preamble_budget
from tolaria.chats.titles import DEFAULT_TITLE, title_from_prompt
from tolaria.core.adapters.manifest import OPENAI_CHAT, Manifest
from tolaria.core.store.db import Conversation, Store, Turn


@dataclass(frozen=True)
class NextTurn:
    """What one turn sends: the typed ``prompt``, what the agent gets, the session resumed."""

    prompt: str
    #: ``prompt`` alone when a session is resumed, else with the history preamble.
    full_prompt: str
    resume_id: str | None
    #: The chat after its naming (its title taken from this first prompt).
    conversation: Conversation


def resume_session(manifest: Manifest | None, conversation: Conversation,
                   earlier: Sequence[Turn], kept_session: str | None = None) -> str | None:
    """The agent session the next turn continues, or None (see the module docstring)."""
    if not earlier or earlier[-1].agent != conversation.agent:
        return None
    last_session = earlier[-1].session_id
    if (manifest is not None and (manifest.can_resume or manifest.protocol == OPENAI_CHAT)
            and conversation.agent_session_id
            and last_session == conversation.agent_session_id):
        return conversation.agent_session_id
    if kept_session and last_session == kept_session:
        return kept_session  # the chat's kept agent (or the session it resumes after a kill)
    return None


def agent_environment(manifest: Manifest | None) -> dict[str, str]:
    """The environment an agent starts with (this process's plus its manifest's ``[env]``)."""
    env = dict(os.environ)
    if manifest is not None:
        env.update(manifest.env)
    return env


class ChatService:
    """The chat rules over one store; no Qt, no processes."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def answered_turns(self, conversation_id: int) -> list[Turn]:
        return answered_turns(self.store, conversation_id)

    def next_turn(self, conversation: Conversation, prompt: str, manifest: Manifest | None, *,
                  kept_session: str | None = None) -> NextTurn:
        """Plan the next turn of ``conversation`` (its agent: ``manifest``) and, on its first
        prompt, name a chat that still has the default title."""
        earlier = self.answered_turns(conversation.id)
        resume_id = resume_session(manifest, conversation, earlier, kept_session)
        if resume_id:
            full_prompt = prompt
        else:
            budget = preamble_budget(prompt, agent_environment(manifest))
            full_prompt = build_prompt(exchanges(self.store, earlier), prompt, budget=budget)
        if not earlier and conversation.title == DEFAULT_TITLE and prompt.strip():
            title = title_from_prompt(prompt)
            conversation = self.store.rename_conversation(conversation.id, title)
        return NextTurn(prompt, full_prompt, resume_id, conversation)
