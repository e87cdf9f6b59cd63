"""A fake agent whose output attacks the terminal that prints it (issue #14, cases 3, 10, 11).

``python tests/fakes/hostile_output_agent.py MODE [PROMPT]``; Claude Code stream-json, like
tests/fakes/fake_agent.py.

- ``escapes``: text and a shell tool whose command carry OSC 52 (clipboard write), OSC 0 (window
  title), CSI 2J (clear screen), C1 controls and a plain SGR colour; then a normal result.
- ``stderr_escapes``: the same sequences on stderr, then exit 1 (they reach the error message).
- ``surrogates``: JSON with lone surrogates (``"\\ud800"``) in text and in a tool's input.
- ``slow``: a shell tool that sleeps (in a new session, like a real CLI's), then a numbered text
  line every 50 ms for a minute: a reader that closes its end early (``| head -1``) must stop it.
- ``quiet``: one text line, then a shell tool that sleeps, and no more output for two minutes:
  a closed reader must be noticed without a write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

SESSION = "hostile-session"
#: The sequences of ``escapes`` (the tests look for each of them in the printed bytes).
OSC52 = "\x1b]52;c;cHduZWQ=\x07"
OSC0 = "\x1b]0;owned title\x1b\\"
CLEAR = "\x1b[2J\x1b[H"
C1 = "\x9b31m\x9d0;c1 title\x9c\x85"
SGR_RED = "\x1b[31m"
SGR_RESET = "\x1b[0m"
HOSTILE = f"safe {OSC52}{OSC0}{CLEAR}{C1}{SGR_RED}red{SGR_RESET} text"


def emit(obj: dict[str, Any], *, ascii_only: bool = False) -> None:
    obj.setdefault("session_id", SESSION)
    sys.stdout.buffer.write(json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8",
                                                                            "surrogatepass"))
    sys.stdout.buffer.write(b"\n")
    sys.stdout.buffer.flush()


def assistant(block: dict[str, Any], message_id: str, *, ascii_only: bool = False) -> None:
    emit({"type": "assistant", "parent_tool_use_id": None, "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": "fake-model",
        "content": [block], "stop_reason": None}}, ascii_only=ascii_only)


def tool_result(tool_id: str, content: str, *, ascii_only: bool = False) -> None:
    emit({"type": "user", "parent_tool_use_id": None, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tool_id, "content": content,
         "is_error": False}]}}, ascii_only=ascii_only)


def result(value: str, *, ascii_only: bool = False) -> None:
    emit({"type": "result", "subtype": "success", "is_error": False, "result": value,
          "stop_reason": "end_turn", "terminal_reason": "completed", "num_turns": 1,
          "usage": {"input_tokens": 1, "output_tokens": 1}, "duration_ms": 1},
         ascii_only=ascii_only)


def init() -> None:
    emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "model": "fake-model",
          "tools": ["Bash"]})


def escapes() -> None:
    init()
    assistant({"type": "text", "text": HOSTILE}, "msg_1")
    assistant({"type": "tool_use", "id": "toolu_h1", "name": "Bash",
               "input": {"command": f"echo {OSC52}{CLEAR}hi"}}, "msg_1")
    tool_result("toolu_h1", f"hi{OSC0}")
    assistant({"type": "text", "text": f"after {C1}tool"}, "msg_2")
    result("done")


def stderr_escapes() -> None:
    init()
    sys.stderr.write(f"agent failed {OSC52}{OSC0}{CLEAR}{C1}badly\n")
    sys.stderr.flush()
    sys.exit(1)


def surrogates() -> None:
    init()
    # ensure_ascii: the lone surrogates travel as JSON escapes ("\ud800"), as a JS agent writes.
    assistant({"type": "text", "text": "half \ud800 a pair \udc00 end"}, "msg_1", ascii_only=True)
    assistant({"type": "tool_use", "id": "toolu_s1", "name": "Bash",
               "input": {"command": "echo \ud83d"}}, "msg_1", ascii_only=True)
    tool_result("toolu_s1", "out \udfff", ascii_only=True)
    assistant({"type": "text", "text": "after the tool"}, "msg_2", ascii_only=True)
    result("done \ud800", ascii_only=True)


def slow() -> None:
    init()
    subprocess.Popen(["sleep", "120"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    for i in range(1200):
        assistant({"type": "text", "text": f"line {i}\n"}, f"msg_{i}")
        time.sleep(0.05)
    result("slow done")


def quiet() -> None:
    init()
    assistant({"type": "text", "text": "one line, then a long tool\n"}, "msg_0")
    subprocess.Popen(["sleep", "120"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(120)
    result("quiet done")


MODES = {"escapes": escapes, "stderr_escapes": stderr_escapes, "surrogates": surrogates,
         "slow": slow, "quiet": quiet}


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    run = MODES.get(mode)
    if run is None:
        print(f"unknown mode {mode!r}; modes: {', '.join(MODES)}", file=sys.stderr)
        return 64
    run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
