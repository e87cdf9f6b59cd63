"""A scripted ACP agent for tests: ``python tests/fakes/fake_acp_agent.py MODE``.

A real process speaking JSON-RPC 2.0 (one JSON object per line) on stdin/stdout, without the
SDK, so the client is tested against the wire format. Modes:

- ``normal``: streams a thought, text, a plan and a finished tool call, then ``end_turn``. A
  prompt containing ``SLEEP`` instead starts a real ``sleep 300`` in a new session (like real
  agents' shell tools), reports the tool call in progress and waits: ``session/cancel`` kills
  the sleep, fails the tool call and answers ``stopReason: cancelled``.
- ``ignore_cancel``: like ``SLEEP`` but never answers ``session/cancel``.
- ``ask_permission``: sends ``session/request_permission`` and says what it was told (with
  ``FAKE_ASK_WHEN`` set, only once that file exists: the tool call is reported first).
- ``chatty_stderr``: writes 300 KB to stderr before answering ``initialize``; then ``normal``.
- ``crash``: exits (code 3) in the middle of the turn.
- ``hang_init``: says so on stderr and never answers ``initialize``.

In any mode a prompt containing ``DEAF`` runs the sleep and never answers ``session/cancel``
(the agent stays alive for more turns). Supports ``session/load`` (replays one old exchange).
Writes the sleep's pid to ``FAKE_PIDFILE`` (written then renamed) when set; with ``FAKE_LOG``
set, appends ``{"pid", "method"}`` of every request it gets to ``$FAKE_LOG/acp.jsonl``.
``FAKE_ACP_COMMANDS`` (a JSON list) is sent as ``available_commands_update`` after
``session/new``. ``FAKE_ACP_PROMPT_CAPS`` (JSON, e.g. ``{"image": true}``) is advertised as its
``promptCapabilities``; the log then also holds each ``session/prompt``'s blocks.
Its ``usage_update`` cost is the session's running total in this process, as ACP says (0.5 per
prompt answered). ``FAKE_NULL_USAGE=1`` adds a ``usage_update`` with ``"used": null`` (as claude-agent-acp sends)
before the normal one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

MODE = sys.argv[1] if len(sys.argv) > 1 else "normal"
SESSION = "fake-acp-session"
_lock = threading.Lock()
_cancelled = threading.Event()
_answers: dict[int | None, Any] = {}
_answered = threading.Condition()
_next_id = [1000]


def send(message: dict[str, Any]) -> None:
    with _lock:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        sys.stdout.flush()


def update(session: str, body: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": session, "update": body}})


def text(session: str, value: str, kind: str = "agent_message_chunk") -> None:
    update(session, {"sessionUpdate": kind, "content": {"type": "text", "text": value}})


def ask(method: str, params: dict[str, Any]) -> Any:
    """Send a request to the client and block until its answer arrives."""
    _next_id[0] += 1
    rid = _next_id[0]
    send({"id": rid, "method": method, "params": params})
    with _answered:
        _answered.wait_for(lambda: rid in _answers)
        return _answers.pop(rid)


def write_pidfile(pids: list[int]) -> None:
    path = os.environ.get("FAKE_PIDFILE")
    if path:
        with open(path + ".tmp", "w") as fh:
            fh.write("\n".join(map(str, pids)))
        os.replace(path + ".tmp", path)


def sleep_tool(session: str, rid: int, honour_cancel: bool) -> None:
    update(session, {"sessionUpdate": "tool_call", "toolCallId": "t-sleep", "title": "Terminal",
                     "kind": "execute", "status": "pending", "rawInput": {}})
    # A new session, like the shell tools of real agents: killing the agent's group misses it.
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    write_pidfile([child.pid])
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "t-sleep",
                     "status": "in_progress", "title": "sleep 300",
                     "rawInput": {"command": "sleep 300"}})
    _cancelled.wait()
    if not honour_cancel:
        time.sleep(3600)
    child.kill()
    child.wait()
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "t-sleep",
                     "status": "failed", "content": [{"type": "content", "content": {
                         "type": "text", "text": "Command cancelled by user."}}]})
    send({"id": rid, "result": {"stopReason": "cancelled"}})


def prompt(rid: int, params: dict[str, Any]) -> None:
    session = params["sessionId"]
    words = " ".join(b.get("text", "") for b in params["prompt"] if b.get("type") == "text")
    _cancelled.clear()
    if MODE == "crash":
        text(session, "partial answer")
        time.sleep(0.05)
        os._exit(3)
    if MODE == "ignore_cancel" or "SLEEP" in words or "DEAF" in words:
        text(session, "I'll run it.")
        sleep_tool(session, rid, honour_cancel=MODE != "ignore_cancel" and "DEAF" not in words)
        return
    if MODE == "ask_permission":
        tool = {"toolCallId": "t-rm", "title": "rm -rf build", "kind": "execute",
                "status": "pending", "rawInput": {"command": "rm -rf build"}}
        update(session, {"sessionUpdate": "tool_call", **tool})
        gate = os.environ.get("FAKE_ASK_WHEN")
        while gate and not os.path.exists(gate):  # the test says when the question comes
            time.sleep(0.01)
        answer = ask("session/request_permission", {"sessionId": session, "toolCall": tool,
                     "options": [
                         {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                         {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
                         {"optionId": "no", "name": "Reject", "kind": "reject_once"}]})
        outcome = answer.get("result", {}).get("outcome", {})
        chosen = outcome.get("optionId") if outcome.get("outcome") == "selected" else "cancelled"
        ok = chosen in ("yes", "always")
        update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "t-rm",
                         "status": "completed" if ok else "failed",
                         "content": [{"type": "content", "content": {
                             "type": "text", "text": "removed" if ok else "not allowed"}}]})
        text(session, f"permission: {chosen}")
        send({"id": rid, "result": {"stopReason": "cancelled" if chosen == "cancelled"
                                    else "end_turn"}})
        return
    text(session, "Let me think.", "agent_thought_chunk")
    update(session, {"sessionUpdate": "plan", "entries": [
        {"content": "say hello", "priority": "high", "status": "in_progress"}]})
    text(session, "Hello ")
    update(session, {"sessionUpdate": "tool_call", "toolCallId": "t-echo", "title": "echo hi",
                     "kind": "execute", "status": "in_progress", "rawInput": {"command": "echo hi"}})
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "t-echo",
                     "status": "completed", "content": [{"type": "content", "content": {
                         "type": "text", "text": "hi"}}]})
    text(session, f"from the fake agent: {words}")
    if os.environ.get("FAKE_NULL_USAGE"):  # like claude-agent-acp before it knows the count
        update(session, {"sessionUpdate": "usage_update", "used": None, "size": 1000})
    _COST[0] += 0.5
    update(session, {"sessionUpdate": "usage_update", "used": 11, "size": 1000,
                     "cost": {"amount": _COST[0], "currency": "USD"}})
    send({"id": rid, "result": {"stopReason": "end_turn",
                                "usage": {"inputTokens": 10, "outputTokens": 12, "totalTokens": 22}}})


#: The session's cost so far in this process (ACP's ``usage_update.cost`` is cumulative).
_COST = [0.0]


def handle(message: dict[str, Any]) -> None:
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    log_dir = os.environ.get("FAKE_LOG")
    if log_dir and method is not None:
        with open(os.path.join(log_dir, "acp.jsonl"), "a") as fh:
            record = {"pid": os.getpid(), "method": method}
            if method == "session/prompt":  # what the client sent (attachments' blocks too)
                record["prompt"] = params.get("prompt")
            if method == "session/new":  # the MCP servers it was given
                record["mcpServers"] = params.get("mcpServers")
            fh.write(json.dumps(record) + "\n")
    if method is None:  # an answer to one of our requests
        with _answered:
            _answers[rid] = message
            _answered.notify_all()
        return
    if method == "initialize":
        if MODE == "hang_init":
            sys.stderr.write("starting very slowly\n")
            sys.stderr.flush()
            return
        if MODE == "chatty_stderr":
            for _ in range(300):
                sys.stderr.write("x" * 1023 + "\n")
            sys.stderr.flush()
        send({"id": rid, "result": {"protocolVersion": 1,
                                    "agentCapabilities": {"loadSession": True, **_prompt_caps()},
                                    "agentInfo": {"name": "fake-acp", "version": "1"},
                                    "authMethods": []}})
    elif method == "session/new":
        send({"id": rid, "result": {"sessionId": SESSION}})
        if os.environ.get("FAKE_ACP_COMMANDS"):  # as claude-agent-acp and gemini do then
            update(SESSION, {"sessionUpdate": "available_commands_update",
                             "availableCommands": json.loads(os.environ["FAKE_ACP_COMMANDS"])})
    elif method == "session/load":
        session = params["sessionId"]
        update(session, {"sessionUpdate": "user_message_chunk",
                         "content": {"type": "text", "text": "old question"}})
        text(session, "OLD ANSWER")
        send({"id": rid, "result": {}})
    elif method == "session/prompt":
        threading.Thread(target=prompt, args=(rid, params), daemon=True).start()
    elif method == "session/cancel":
        _cancelled.set()
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": f"method not found: {method}"}})


def _prompt_caps() -> dict[str, Any]:
    """``FAKE_ACP_PROMPT_CAPS``: the ``promptCapabilities`` to advertise (JSON), none if unset."""
    caps = os.environ.get("FAKE_ACP_PROMPT_CAPS")
    return {"promptCapabilities": json.loads(caps)} if caps else {}


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            handle(json.loads(line))
    # The client closed our stdin: like real agents, leave.
    os._exit(0)


if __name__ == "__main__":
    main()
