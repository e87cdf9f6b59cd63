"""Tolaria's built-in offline demo agent: ``python -m tolaria.demo_agent PROMPT``.

It prints what Claude Code prints with ``-p --output-format stream-json --verbose
--include-partial-messages`` (see tests/fixtures/claude/), so a fresh install has something real to
talk to, and so this file documents the format: ``system/init``; per API message, ``stream_event``
deltas and then the complete ``assistant`` line with the *same* message id (consumers show the
deltas and skip text/thinking of messages they already streamed); a ``user`` line carrying the
``tool_result``; and a final ``result`` line. Every line is flushed at once. While the tool runs,
a ``tool_progress`` line per line of its output carries the output so far (``partial_output``, a
field of this agent's own: real Claude shows a tool's output only in its result), so the tool
card's live tail has something to show, as with agents that stream tool output (ACP's updates).

The Bash tool is really run, the way real CLIs run it: ``/bin/sh -c`` in a **new session**, so the
tool is out of reach of a signal sent to the agent's own process group.

Signals, as real Claude: SIGINT kills the tool's process group and ends the turn with a
``result`` of ``error_during_execution`` / ``aborted_tools``, exit 0. SIGTERM exits 143 at once
with no ``result`` line and leaves the tool running: that is what Tolaria's tree kill is for.

Knobs: ``TOLARIA_DEMO_TOOL_SECONDS`` (tool's sleep, default 6), ``TOLARIA_DEMO_DELAY`` (seconds
between streamed deltas, default 0.02).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

VERSION = "0.1.0"
MODEL = "tolaria-demo"
#: The context window the demo model says it has.
CONTEXT_WINDOW = 200_000

ANSWER = """\
## Done

The command ran in its own session and printed:

- `started`, right away
- `finished`, {seconds:g} s later

Here is the same thing in Python:

```python
import subprocess

out = subprocess.run(["sh", "-c", "{command}"], capture_output=True, text=True)
print(out.stdout)
```
"""


class Interrupted(Exception):
    """Raised from the SIGINT handler: the user asked this turn to stop."""


def _on_sigint(signum: int, frame: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not break the cleanup
    raise Interrupted


def _env_float(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


class DemoAgent:
    def __init__(self, prompt: str, resume: str | None = None) -> None:
        self.prompt = prompt
        # Like `claude --resume ID`: the same session continues.
        self.resumed = resume is not None
        self.session_id = resume or str(uuid.uuid4())
        self.delay = _env_float("TOLARIA_DEMO_DELAY", 0.02)
        self.tool_seconds = _env_float("TOLARIA_DEMO_TOOL_SECONDS", 6.0)
        self.started = time.monotonic()
        self.output_tokens = 0
        self.tool: subprocess.Popen[bytes] | None = None

    def emit(self, obj: dict[str, Any]) -> None:
        obj.setdefault("session_id", self.session_id)
        sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def event(self, message_id: str, event: dict[str, Any]) -> None:
        self.emit({"type": "stream_event", "event": event, "parent_tool_use_id": None,
                   "api_message_id": message_id})

    def assistant(self, message_id: str, block: dict[str, Any]) -> None:
        """One ``assistant`` line per content block, as Claude prints them."""
        self.emit({"type": "assistant", "parent_tool_use_id": None, "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": MODEL,
            "content": [block], "stop_reason": None,
            "usage": {"input_tokens": 0, "output_tokens": self.output_tokens}}})

    def stream_block(self, message_id: str, index: int, kind: str, text: str) -> None:
        """Stream a text or thinking block as word-sized deltas, then print it whole."""
        key = "thinking" if kind == "thinking" else "text"
        delta_type = f"{key}_delta"
        self.event(message_id, {"type": "content_block_start", "index": index,
                                "content_block": {"type": kind, key: ""}})
        for word in re.findall(r"\S+\s*|\s+", text):
            time.sleep(self.delay)
            self.output_tokens += 1
            self.event(message_id, {"type": "content_block_delta", "index": index,
                                    "delta": {"type": delta_type, key: word}})
        self.assistant(message_id, {"type": kind, key: text})
        self.event(message_id, {"type": "content_block_stop", "index": index})

    def run_tool(self, tool_id: str, command: str) -> None:
        # A new session, like Claude Code's Bash tool: the tool gets its own process group, which
        # a signal to our group never reaches. We kill it ourselves on SIGINT (see main()).
        self.tool = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        assert self.tool.stdout is not None
        out = b""
        for line in self.tool.stdout:  # each line as the tool prints it: the live tail
            out += line
            self.tool_progress(tool_id, out.decode(errors="replace"))
        code, self.tool = self.tool.wait(), None
        text = out.decode(errors="replace").rstrip("\n")
        self.tool_result(tool_id, text if code == 0 else f"Exit code {code}\n{text}", code != 0)

    def tool_progress(self, tool_id: str, output: str) -> None:
        """Claude's ``tool_progress`` line, plus ``partial_output`` (the output so far), which
        only this agent sends: real Claude prints a tool's output once, in its result."""
        self.emit({"type": "tool_progress", "tool_use_id": tool_id, "tool_name": "Bash",
                   "parent_tool_use_id": None,
                   "elapsed_time_seconds": round(time.monotonic() - self.started, 1),
                   "partial_output": output})

    def tool_result(self, tool_id: str, content: str, is_error: bool) -> None:
        self.emit({"type": "user", "parent_tool_use_id": None, "message": {
            "role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                         "content": content, "is_error": is_error}]}})

    def result(self, text: str, *, interrupted: bool = False) -> None:
        self.emit({
            "type": "result",
            "subtype": "error_during_execution" if interrupted else "success",
            "is_error": interrupted,
            "result": "" if interrupted else text,
            "stop_reason": "tool_use" if interrupted else "end_turn",
            "terminal_reason": "aborted_tools" if interrupted else "completed",
            "num_turns": 2,
            "usage": {"input_tokens": len(self.prompt.split()) + 42,
                      "output_tokens": self.output_tokens},
            "total_cost_usd": 0,
            # as Claude says its model's context window (the chat's context meter)
            "modelUsage": {MODEL: {"outputTokens": self.output_tokens,
                                   "contextWindow": CONTEXT_WINDOW}},
            "duration_ms": int((time.monotonic() - self.started) * 1000),
        })

    def message_start(self) -> str:
        message_id = f"msg_demo_{uuid.uuid4().hex[:16]}"
        self.event(message_id, {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": MODEL,
            "content": []}})
        return message_id

    def turn(self) -> None:
        self.emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "model": MODEL,
                   "tools": ["Bash"], "claude_code_version": f"tolaria-demo-{VERSION}"})
        brief = " ".join(self.prompt.split())
        brief = brief if len(brief) <= 60 else brief[:57] + "..."
        asked = f'"{brief}"' if brief else "an empty prompt"
        about = f"You asked {asked}." if brief else "Your prompt was empty, so here is a tour."
        if self.resumed:
            about = f"(Continuing session {self.session_id[:8]}.) " + about
        # First API message: thinking, text and a tool call, each block streamed then printed whole.
        first = self.message_start()
        self.stream_block(first, 0, "thinking", f"The user sent {asked}. This is the offline "
                          "demo, so I will show a shell tool that takes a while, then answer.")
        self.stream_block(first, 1, "text", f"{about} I'll run a command for this.")
        command = f"echo started; sleep {self.tool_seconds:g}; echo finished"
        tool_id = f"toolu_demo_{uuid.uuid4().hex[:12]}"
        tool_input = {"command": command, "description": f"Run: {command}"}
        self.event(first, {"type": "content_block_start", "index": 2, "content_block": {
            "type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}})
        self.event(first, {"type": "content_block_delta", "index": 2, "delta": {
            "type": "input_json_delta", "partial_json": json.dumps(tool_input)}})
        self.assistant(first, {"type": "tool_use", "id": tool_id, "name": "Bash",
                               "input": tool_input})
        self.event(first, {"type": "content_block_stop", "index": 2})
        self.event(first, {"type": "message_stop"})
        try:
            self.run_tool(tool_id, command)
        except Interrupted:
            if self.stop_tool():
                self.tool_result(tool_id, "Interrupted by user", True)
            raise
        # Second API message: the answer, once the tool result is in.
        second = self.message_start()
        answer = ANSWER.format(seconds=self.tool_seconds, command=command)
        self.stream_block(second, 0, "text", answer)
        self.event(second, {"type": "message_stop"})
        self.result(answer)

    def stop_tool(self) -> bool:
        """Kill the running tool's process group (its shell and ``sleep``); reap the shell."""
        if self.tool is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            if sys.platform == "win32":  # no process groups: the shell only
                self.tool.terminate()
            else:
                os.killpg(self.tool.pid, signal.SIGTERM)
        self.tool.wait()
        if self.tool.stdout is not None:
            self.tool.stdout.close()
        self.tool = None
        return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    # Options, then the prompt after "--" (a prompt that starts with "-" stays the prompt).
    words: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, words = args[:at], args[at + 1 :]
    if args[:1] == ["--version"]:
        print(f"tolaria-demo-agent {VERSION}")
        return 0
    resume = None
    if "--resume" in args:
        at = args.index("--resume")
        resume = args[at + 1] if at + 1 < len(args) else None
        args = args[:at] + args[at + 2 :]
    agent = DemoAgent(" ".join(args + words), resume)
    signal.signal(signal.SIGINT, _on_sigint)
    # Like claude: SIGTERM ends the agent with 143 and no result line; the tool is left behind.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signal.SIGTERM))
    try:
        agent.turn()
    except Interrupted:
        agent.stop_tool()
        agent.result("", interrupted=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
