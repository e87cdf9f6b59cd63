"""A fake Claude Code in streaming-input mode (``-p --input-format stream-json``), for tests.

``python tests/fakes/fake_claude_stream.py [--ignore-interrupt] [--ignore-sigint] [--linger]
[--refuse-interrupt] [--crash] [ARGS...]`` reads stream-json lines from stdin and answers with lines replayed from the
real capture tests/fixtures/claude/claude_streamin.jsonl (only the model text and ids differ):

- a ``user`` message: ``system/init``, then, when the text contains ``RUN_SLEEP``, the captured
  "I'll run it." text and Bash ``tool_use``, and the "tool": a ``sleep 300`` in its own session
  (as Claude runs its shell tool). Otherwise an assistant text ``You said: <prompt>`` and a
  ``result`` success.
- a ``control_request`` interrupt while the tool runs: the tool is killed, then
  ``control_response`` (same request id), the captured tool_result / "[Request interrupted...]"
  lines and the ``result`` error_during_execution / aborted_tools. The process stays alive.
- SIGINT (as real Claude): the tool is killed, the aborted ``result`` printed, exit 0.
- end of stdin: exit 0 (with ``--linger``: never exits by itself).
- several turns on one process (as real Claude): ``total_cost_usd`` is cumulative (each result
  adds the capture's own cost of that kind of turn). ``RUN_BG`` in the text starts a
  ``sleep 300`` in its own session and ends the turn at once (a tool left running in the
  background); ``START_HELPER`` starts a ``sleep 300`` in the agent's own process group (a
  helper like an MCP server) and ends the turn. Their pids go to ``$FAKE_PIDFILE`` as well.

With ``--mcp-config=PATH`` (Tolaria's generated file) it starts the stdio MCP servers in it at
once, with a cleaned environment as Claude does (tests/fakes/fake_mcp_client.py).

Misbehaving on purpose: ``--ignore-interrupt`` never answers an interrupt, ``--refuse-interrupt``
answers it with an error ``control_response``, ``--ignore-sigint`` ignores SIGINT, ``--crash``
exits 3 right after ``system/init``.

Every stdin line is appended verbatim to ``$FAKE_LOG/stdin.jsonl`` and the argv is written to
``$FAKE_LOG/argv.json`` (when ``FAKE_LOG`` is set); the agent and tool pids go to
``$FAKE_PIDFILE`` once the tool runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # mypy knows this folder as ``fakes`` under tests/, the tests' import root
    from fakes.fake_mcp_client import start_servers
else:
    from fake_mcp_client import start_servers  # (this folder is on sys.path: the script's own)

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "claude" / "claude_streamin.jsonl"
SESSION = "f01a032f-daed-4fdc-bf93-95fc1f53f8d3"  # the capture's session id


def load_capture() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CAPTURE.read_text().splitlines()]


LINES = load_capture()
#: The capture, by role: the first turn was interrupted, the second ended normally.
INIT, TEXT, TOOL_USE, CONTROL_RESPONSE, TOOL_RESULT, INTERRUPTED, ABORTED = LINES[:7]
REPLY, SUCCESS = LINES[8], LINES[9]

tool: subprocess.Popen[bytes] | None = None
background: list[subprocess.Popen[bytes]] = []
log_dir = os.environ.get("FAKE_LOG")
cost = [0.0]  # total_cost_usd so far: cumulative per process, as real Claude's


#: Set while a ``RETRY_FOREVER`` turn prints Claude's ``system/api_retry`` lines (a model that
#: cannot be reached); an interrupt clears it.
retrying = threading.Event()
#: Reentrant: the SIGINT handler emits too, and Python runs it in the main thread between two
#: bytecodes, possibly inside the main thread's own ``emit`` (right after the control_response
#: was flushed, before the lock is released). With a plain Lock the fake then deadlocked and
#: ignored SIGINT (tests/core/turns/test_stream_input.py flaked: the 20 s window ran out).
_out = threading.RLock()


def emit(data: dict[str, Any]) -> None:
    if data.get("type") == "result" and isinstance(data.get("total_cost_usd"), float):
        cost[0] += data["total_cost_usd"]
        data = {**data, "total_cost_usd": cost[0]}
    with _out:
        sys.stdout.write(json.dumps(data, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def retry_forever(session: str) -> None:
    attempt = 0
    while retrying.is_set():
        attempt += 1
        emit({"type": "system", "subtype": "api_retry", "attempt": attempt, "max_retries": 10,
              "retry_delay_ms": 100, "error_status": None, "error": "unknown",
              "session_id": session})
        time.sleep(0.1)


def with_session(data: dict[str, Any], session: str) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    if "session_id" in data:
        data["session_id"] = session
    return data


def kill_tool() -> None:
    global tool
    if tool is not None:
        os.killpg(tool.pid, signal.SIGKILL)  # the tool has its own session (and group)
        tool.wait()
        tool = None


def write_pids(*pids: int) -> None:
    pidfile = os.environ.get("FAKE_PIDFILE")
    if pidfile:
        with open(pidfile + ".tmp", "w") as out:
            out.write("".join(f"{pid}\n" for pid in pids))
        os.replace(pidfile + ".tmp", pidfile)


def start_tool() -> None:
    global tool
    tool = subprocess.Popen(["sleep", "300"], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    write_pids(os.getpid(), tool.pid)


def start_background(own_session: bool) -> None:
    child = subprocess.Popen(["sleep", "300"], start_new_session=own_session,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    background.append(child)
    write_pids(os.getpid(), child.pid)


def on_user(message: dict[str, Any], session: str, crash: bool) -> None:
    content = message["message"]["content"]
    emit(with_session(INIT, session))
    if crash:
        sys.exit(3)
    if "RETRY_FOREVER" in content:
        retrying.set()
        threading.Thread(target=retry_forever, args=(session,), daemon=True).start()
        return
    if "RUN_SLEEP" in content:
        emit(with_session(TEXT, session))
        emit(with_session(TOOL_USE, session))
        start_tool()
        return
    if "RUN_BG" in content or "START_HELPER" in content:
        start_background(own_session="RUN_BG" in content)
    reply = with_session(REPLY, session)
    reply["message"]["content"] = [{"type": "text", "text": f"You said: {content}"}]
    emit(reply)
    emit(with_session(SUCCESS, session))


def end_aborted(session: str) -> None:
    emit(with_session(TOOL_RESULT, session))
    emit(with_session(INTERRUPTED, session))
    emit(with_session(ABORTED, session))


def main(argv: list[str]) -> int:
    ignore_interrupt = "--ignore-interrupt" in argv
    refuse_interrupt = "--refuse-interrupt" in argv
    linger = "--linger" in argv
    crash = "--crash" in argv
    session = argv[argv.index("--resume") + 1] if "--resume" in argv else SESSION
    if log_dir:
        Path(log_dir, "argv.json").write_text(json.dumps(argv))

    def on_sigint(signum: int, frame: object) -> None:
        kill_tool()
        end_aborted(session)
        os._exit(0)

    signal.signal(signal.SIGINT, signal.SIG_IGN if "--ignore-sigint" in argv else on_sigint)
    start_servers(argv)  # --mcp-config=PATH: its stdio servers, as Claude starts them
    for raw in sys.stdin.buffer:
        if log_dir:
            with open(Path(log_dir, "stdin.jsonl"), "ab") as fh:
                fh.write(raw)
        data = json.loads(raw)
        if data["type"] == "user":
            on_user(data, session, crash)
        elif data["type"] == "control_request" and refuse_interrupt:
            emit({"type": "control_response", "response": {
                "subtype": "error", "request_id": data["request_id"], "error": "not now"}})
        elif data["type"] == "control_request" and not ignore_interrupt:
            was_running = tool is not None or retrying.is_set()
            retrying.clear()
            kill_tool()
            response = json.loads(json.dumps(CONTROL_RESPONSE))
            response["response"]["request_id"] = data["request_id"]
            emit(response)
            if was_running:
                end_aborted(session)
    while linger:
        time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
