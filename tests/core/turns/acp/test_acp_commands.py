"""An ACP agent's own slash commands (``available_commands_update``, issue 26 item 4), mapped
from the real captured sessions of claude-agent-acp and ``gemini --acp`` and from hostile lists;
stored and read back like every event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tolaria.core.events import AgentCommands, event_from_dict, to_dict
from tolaria.core.turns.acp.updates import UpdateMapper

CAPTURES = Path(__file__).resolve().parents[3] / "fixtures" / "acp"


def _commands_update(capture: str) -> dict[str, Any]:
    for line in (CAPTURES / capture).read_text().splitlines():
        msg = json.loads(line).get("msg", {})
        update = msg.get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "available_commands_update":
            return dict(update)
    raise AssertionError(f"no available_commands_update in {capture}")


def test_the_captured_command_lists_become_one_event() -> None:
    for capture, name in (("acp_text.acp.jsonl", "compact"),
                          ("gemini_acp_cancel.acp.jsonl", "memory show")):
        (event,) = UpdateMapper("ai-agent-stream-x").feed(_commands_update(capture))
        assert isinstance(event, AgentCommands)
        found = {c["name"]: c for c in event.commands}
        assert name in found
        assert all("\n" not in c["description"] and len(c["description"]) <= 300
                   for c in event.commands)
        assert event_from_dict(json.loads(json.dumps(to_dict(event)))) == event
    claude = UpdateMapper("s").feed(_commands_update("acp_text.acp.jsonl"))[0]
    assert isinstance(claude, AgentCommands)
    debug = next(c for c in claude.commands if c["name"] == "debug")
    assert debug["hint"] == "[issue description]"


def test_a_hostile_list_is_bounded_and_bad_entries_are_left_out() -> None:
    listed: list[Any] = [None, 3, {"name": ""}, {"name": "a\nb"}, {"description": "no name"},
                         {"name": "/ok", "description": 7, "input": "x"},
                         *({"name": f"c{i}", "description": "d" * 5000} for i in range(500))]
    (event,) = UpdateMapper("s").feed({"sessionUpdate": "available_commands_update",
                                       "availableCommands": listed})
    assert isinstance(event, AgentCommands)
    assert event.commands[0] == {"name": "ok", "description": "", "hint": ""}
    assert len(event.commands) == 200
    assert all(len(c["description"]) <= 300 for c in event.commands)
    (empty,) = UpdateMapper("s").feed({"sessionUpdate": "available_commands_update",
                                       "availableCommands": "nope"})
    assert isinstance(empty, AgentCommands) and empty.commands == ()


def test_a_replayed_session_still_says_its_commands() -> None:
    mapper = UpdateMapper("s")
    mapper.muted = True  # session/load replays history: no news, but the commands are current
    assert mapper.feed({"sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": "old"}}) == []
    (event,) = mapper.feed({"sessionUpdate": "available_commands_update",
                            "availableCommands": [{"name": "init", "description": "x"}]})
    assert isinstance(event, AgentCommands)
