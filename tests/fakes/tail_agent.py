"""A fake Claude (stream-json) whose answer ends after it has exited: ``tail_agent.py PROMPT``.

The agent prints ``system/init`` and the first part of its answer, starts a helper that shares
its stdout (in its process group, as a tool's child would be) and exits 0 at once. The run then
sees the agent's own exit (too late for a stop to count) and ends what is left: the helper, on
SIGTERM, writes ``$FAKE_TAIL_DIR/term``, waits until ``$FAKE_TAIL_DIR/go`` exists (at most 20 s),
then prints the last text and the ``result`` success line and exits. So the tail of the answer
is still draining from the pipe while the turn is finishing, for as long as the test holds it: a
Stop can land exactly in that window.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

SESSION = "fake-tail-session"
FIRST = "The first part of the answer. "
LAST = "And these are the last words."

HELPER = """\
import os, signal, sys, time
from pathlib import Path
folder = Path(os.environ["FAKE_TAIL_DIR"])
lines = sys.argv[1:]
def on_term(signum, frame):
    (folder / "term.tmp").write_text(str(os.getpid()))
    os.replace(folder / "term.tmp", folder / "term")
    deadline = time.monotonic() + 20
    while not (folder / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    for line in lines:
        sys.stdout.write(line + "\\n")
    sys.stdout.flush()
    os._exit(0)
signal.signal(signal.SIGTERM, on_term)
(folder / "helper").write_text(str(os.getpid()))
while True:
    signal.pause()
"""


def line(obj: dict[str, object]) -> str:
    obj.setdefault("session_id", SESSION)
    return json.dumps(obj)


def text(value: str) -> str:
    return line({"type": "assistant", "parent_tool_use_id": None, "message": {
        "id": "msg_tail_1", "type": "message", "role": "assistant", "model": "fake-model",
        "content": [{"type": "text", "text": value}], "stop_reason": None}})


def main() -> None:
    folder = Path(os.environ["FAKE_TAIL_DIR"])
    result = line({"type": "result", "subtype": "success", "is_error": False,
                   "result": FIRST + LAST, "stop_reason": "end_turn", "session_id": SESSION,
                   "num_turns": 1, "usage": {"input_tokens": 3, "output_tokens": 9},
                   "total_cost_usd": 0.001, "duration_ms": 12})
    sys.stdout.write(line({"type": "system", "subtype": "init", "cwd": os.getcwd(),
                           "model": "fake-model", "tools": []}) + "\n")
    sys.stdout.write(text(FIRST) + "\n")
    sys.stdout.flush()
    helper = subprocess.Popen([sys.executable, "-c", HELPER, text(LAST), result])
    deadline = time.monotonic() + 10
    while not (folder / "helper").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # its SIGTERM handler is in place before the agent leaves
    del helper  # not waited for: it outlives the agent, holding the pipe
    os._exit(0)


if __name__ == "__main__":
    main()
