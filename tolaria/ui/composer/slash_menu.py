"""What ``/`` at the start of the composer offers: Tolaria's own commands (run at once) and the
agent's (inserted, for the agent to run), each with its description."""

from __future__ import annotations

from tolaria.chats.slash import AgentCommand
from tolaria.ui.composer.suggestions import Suggestion

#: Tolaria's commands: name -> description. The window runs them (ui/window/slash_actions.py).
TOLARIA_COMMANDS: dict[str, str] = {
    "new": "Start a new chat with this agent in this folder",
    "clear": "Start afresh: a new chat, same agent and folder",
    "stop": "Stop the running turn",
    "restart": "Stop the running turn and run its prompt again",
    "rename": "Rename this chat",
    "export": "Export this chat as HTML, Markdown or JSON",
    "model": "Choose the agent (and its model) of this chat",
    "folder": "Choose the working folder of this chat",
    "limits": "Set what this chat's runs may spend",
    "fanout": "Ask several agents the same question",
    "find": "Find text in this chat",
    "worktree": "Start a new chat in a git worktree",
    "preferences": "Open Preferences",
}


def slash_rows(query: str, agent_commands: list[AgentCommand],
               agent_name: str) -> list[Suggestion]:
    """The commands matching ``query`` (what follows ``/``): names starting with it first, then
    names or descriptions containing it; the agent's (this project's, the user's) before
    Tolaria's within each, as they are the ones a chat's folder adds."""
    q = query.lower()
    rows: list[tuple[int, Suggestion]] = []
    for command in agent_commands:
        tag = f"{agent_name} · {command.source}" if command.source != "agent" else agent_name
        rows.append((_score(q, command.name, command.description), Suggestion(
            f"/{command.name}", command.description, "agent", command.name, tag)))
    for name, description in TOLARIA_COMMANDS.items():
        rows.append((_score(q, name, description), Suggestion(
            f"/{name}", description, "tolaria", name, "Tolaria")))
    kept = [(score, row) for score, row in rows if score >= 0]
    kept.sort(key=lambda item: item[0])  # stable: the order above within a score
    return [row for _, row in kept]


def _score(q: str, name: str, description: str) -> int:
    lowered = name.lower()
    if not q or lowered.startswith(q):
        return 0
    if q in lowered:
        return 1
    if q in description.lower():
        return 2
    return -1
