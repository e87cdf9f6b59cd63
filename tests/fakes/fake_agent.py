"""A misbehaving fake coding agent for tests: ``python tests/fakes/fake_agent.py MODE [PROMPT]``.

A real process that prints Claude Code's stream-json (``--output-format stream-json --verbose``,
see tests/fixtures/claude/) with session id ``fake-session``, then misbehaves as MODE asks: hangs,
floods, prints oversized or malformed lines, crashes, ignores SIGTERM, or leaves processes behind
(a tool in a new session, a grandchild holding stdout, a setsid double-fork daemon, a deep tree,
a non-dumpable daemon, a pid hopper and a minutes-long hop chain, a daemon with an empty
environment, ssh-agent).
The mode may also come from ``FAKE_AGENT_MODE``. Every line is flushed as soon as it is written.
Modes that spawn processes write their pids (one per line) to ``FAKE_PIDFILE`` if it is set; the
file appears complete (written then renamed) only once every pid exists.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

SESSION = "fake-session"
EX_USAGE = 64

# One level of the tree3 / ignore_term_tree modes: `python -c LEVEL DEPTH IGNORE`. Each level
# starts the next one, reads back the pids of its subtree, reports them (with its own) to its
# parent on stdout, then sleeps. Level 2 gets a new session, level 3 its own process group, so a
# stop that only signals the agent's process group misses them.
LEVEL = """\
import os, signal, subprocess, sys, time
depth, ignore = int(sys.argv[1]), sys.argv[2] == "1"
for signum in (signal.SIGTERM, signal.SIGINT):
    signal.signal(signum, signal.SIG_IGN if ignore else signal.SIG_DFL)
pids = [str(os.getpid())]
if depth < 3:
    where = {"start_new_session": True} if depth == 1 else {"process_group": 0}
    child = subprocess.Popen([sys.executable, "-c", sys.argv[3], str(depth + 1), sys.argv[2],
                              sys.argv[3]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, **where)
    pids += child.stdout.readline().decode().split()
print(" ".join(pids), flush=True)
time.sleep(300)
"""


# --- output helpers -------------------------------------------------------------------------


def write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def emit(obj: dict[str, Any]) -> None:
    obj.setdefault("session_id", SESSION)
    write(json.dumps(obj, ensure_ascii=False).encode() + b"\n")


def init() -> None:
    emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "session_id": SESSION,
          "model": "fake-model", "tools": ["Bash"]})


def assistant(block: dict[str, Any], message_id: str = "msg_fake_1") -> None:
    emit({"type": "assistant", "parent_tool_use_id": None, "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": "fake-model",
        "content": [block], "stop_reason": None}})


def text(value: str, message_id: str = "msg_fake_1") -> None:
    assistant({"type": "text", "text": value}, message_id)


def tool_use(tool_id: str, command: str) -> None:
    assistant({"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}})


def tool_result(tool_id: str, content: str, is_error: bool = False) -> None:
    emit({"type": "user", "parent_tool_use_id": None, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tool_id, "content": content,
         "is_error": is_error}]}})


def result(value: str, *, is_error: bool = False, terminal_reason: str = "completed") -> None:
    emit({"type": "result", "subtype": "success", "is_error": is_error, "result": value,
          "stop_reason": "end_turn", "terminal_reason": terminal_reason, "session_id": SESSION,
          "num_turns": 1, "usage": {"input_tokens": 3, "output_tokens": 5},
          "total_cost_usd": 0.001, "duration_ms": 12})


def hang() -> NoReturn:
    """Sleep forever, silently (signals with a handler or a default action still apply)."""
    while True:
        signal.pause()


def ignore_term_and_int() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def write_pidfile(pids: list[int]) -> None:
    path = os.environ.get("FAKE_PIDFILE")
    if not path:
        return
    with open(path + ".tmp", "w") as fh:
        fh.write("".join(f"{pid}\n" for pid in pids))
    os.replace(path + ".tmp", path)  # readers never see a half-written file


def start_session_tool() -> subprocess.Popen[bytes]:
    """The agent's "tool": ``sleep 300`` in a new session, as the real CLIs run their shell
    tools (out of the agent's process group); the pidfile gets the agent and the tool."""
    tool = subprocess.Popen(["sleep", "300"], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    write_pidfile([os.getpid(), tool.pid])
    return tool


# --- modes ----------------------------------------------------------------------------------


def normal(prompt: str) -> None:
    init()
    text("Hello from fake")
    tool_use("toolu_fake_1", "echo hi")
    tool_result("toolu_fake_1", "hi")
    text("Finished.", "msg_fake_2")
    result("Finished.")


def slow_start(prompt: str) -> None:
    time.sleep(1.5)
    normal(prompt)


def hang_mode(prompt: str) -> None:
    init()
    hang()


def flood(prompt: str) -> None:
    init()
    count = int(os.environ.get("FAKE_FLOOD_LINES", "20000"))
    filler = "lorem ipsum " * 84  # ~1 KB per line
    for i in range(count):
        text(f"flood {i}: {filler}", f"msg_flood_{i}")
    result(f"flooded {count} lines")


def oversized(prompt: str) -> None:
    init()
    remaining = int(float(os.environ.get("FAKE_OVERSIZED_MB", "100")) * 1024 * 1024)
    chunk = b"x" * (1024 * 1024)
    while remaining > 0:  # in chunks: the fake itself stays small
        write(chunk[:remaining])
        remaining -= len(chunk)
    write(b"\n")
    text("after oversized", "msg_fake_2")
    result("after oversized")


def malformed(prompt: str) -> None:
    init()
    write(b'{"type":"assistant", "message": {\n')
    write(b"not json at all\n")
    write(b"\xff\xfe\x00garbage\n")
    write(b"[1,2,3]\n")
    write(b'{"type":"assistant","message":"wrong-type"}\n')
    write(b'{"type":"user","message":{"content":[{"type":"tool_result"}]}}\n')
    text("still alive", "msg_fake_2")
    result("still alive")


def crash(prompt: str) -> None:
    init()
    text("about to crash")
    write(b'{"type":"assist')  # half a line, no newline
    os._exit(3)


def stderr_exit(prompt: str) -> None:
    for i in range(1, 6):
        print(f"fake error line {i}", file=sys.stderr, flush=True)
    print("FATAL: model exploded", file=sys.stderr, flush=True)
    init()
    sys.exit(2)


def error_result(prompt: str) -> None:
    init()
    result("Invalid API key · Fix external API key", is_error=True, terminal_reason="api_error")
    sys.exit(1)


def ignore_term(prompt: str) -> None:
    ignore_term_and_int()  # before init: a test may signal as soon as it sees init
    init()
    text("ignoring SIGTERM and SIGINT")
    hang()


def tool(prompt: str) -> None:
    init()
    text("I'll run a tool.")
    tool_use("toolu_fake_1", "sleep 300")
    # Like real CLIs: the tool runs in a new session, out of reach of our process group.
    child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             start_new_session=True)
    write_pidfile([child.pid])
    text("tool started", "msg_fake_2")
    hang()


def grandchild_stdout(prompt: str) -> None:
    init()
    # Inherits our stdout: the reader sees no EOF while it lives, even after we exit.
    child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    write_pidfile([child.pid])
    text("leaving a grandchild on stdout")
    result("leaving a grandchild on stdout")
    sys.exit(0)


def daemon(prompt: str) -> None:
    init()
    read_fd, write_fd = os.pipe()
    if os.fork() == 0:  # intermediate: new session, fork the daemon, exit at once
        os.close(read_fd)
        os.setsid()
        pid = os.fork()
        if pid:
            os.write(write_fd, f"{pid}\n".encode())
            os._exit(0)
        os.close(write_fd)
        os.chdir("/")
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, 4096)  # holds no pipe of whoever started the agent
        time.sleep(300)
        os._exit(0)
    os.close(write_fd)
    os.wait()  # the intermediate; its child is now an orphan (reparented to init or a reaper)
    with os.fdopen(read_fd) as fh:
        daemon_pid = int(fh.read().strip())
    write_pidfile([daemon_pid])
    text("daemon started")
    if os.environ.get("FAKE_EXIT_AFTER_DAEMON") == "1":
        result("daemon started")
        sys.exit(0)
    hang()


def _detach() -> None:
    """Stdio to /dev/null, no inherited pipes: a daemon that holds nothing of its starter."""
    os.chdir("/")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, 4096)


def _not_dumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0), as ssh-agent and gpg-agent do: /proc/PID/environ becomes
    root-owned, unreadable to the user who started us."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        os._exit(70)


def _wait_file(path: str, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.005)


def dumpable_daemon(prompt: str) -> None:
    """setsid + double fork, then not dumpable; the daemon writes FAKE_PIDFILE itself once it
    is (so a test that sees the file knows /proc hides the daemon's environment)."""
    init()
    if os.fork() == 0:  # intermediate: new session, fork the daemon, exit at once
        os.setsid()
        if os.fork():
            os._exit(0)
        _detach()
        _not_dumpable()
        write_pidfile([os.getpid()])
        time.sleep(300)
        os._exit(0)
    os.wait()
    _wait_file(os.environ.get("FAKE_PIDFILE", ""))
    text("non-dumpable daemon started")
    hang()


def hopper(prompt: str) -> None:
    """A tool that answers SIGTERM by forking a new-session child and exiting: a "pid hopper".

    Every incarnation appends its pid to FAKE_HOPLOG; FAKE_NONDUMPABLE=1 also hides its
    environment. FAKE_PIDFILE gets the first one.
    """
    init()
    log = os.environ["FAKE_HOPLOG"]
    hide = os.environ.get("FAKE_NONDUMPABLE") == "1"

    def note(pid: int) -> None:
        with open(log, "a") as fh:
            fh.write(f"{pid}\n")

    def incarnate() -> None:
        if hide:
            _not_dumpable()
        note(os.getpid())

    def hop(signum: int, frame: object) -> None:
        child = os.fork()
        if child:
            note(child)  # by the parent too: the child may be killed before it can write
            os._exit(0)
        os.setsid()
        incarnate()

    if os.fork() == 0:
        os.setsid()
        _detach()
        signal.signal(signal.SIGTERM, hop)
        incarnate()
        write_pidfile([os.getpid()])
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            time.sleep(0.05)
        os._exit(0)
    _wait_file(os.environ.get("FAKE_PIDFILE", ""))
    text("hopper started")
    hang()


def _chain(bare: bool) -> None:
    """A tool that on SIGTERM becomes a fork-and-exit chain for minutes (tests/fakes/
    hop_chain.py), in a session of its own; ``bare``: double-forked away (an orphan) with an
    empty environment, so no marker and no parentage leads to it."""
    init()
    log, pidfile = os.environ["FAKE_HOPLOG"], os.environ["FAKE_PIDFILE"]
    argv = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "hop_chain.py"), log, pidfile]
    if os.fork() == 0:
        os.setsid()
        if bare and os.fork():
            os._exit(0)
        _detach()
        os.execve(sys.executable, argv, {} if bare else dict(os.environ))
    if bare:
        os.wait()
    _wait_file(pidfile)
    text("hop chain started")
    hang()


def hopper_chain(prompt: str) -> None:
    _chain(bare=False)


def hopper_chain_bare(prompt: str) -> None:
    _chain(bare=True)


#: The daemon of ``scrubbed_daemon``: ``python -c DAEMON PIDFILE HIDE`` with an empty environment.
DAEMON = """\
import ctypes, os, sys, time
if sys.argv[2] == "1" and ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    os._exit(70)
with open(sys.argv[1] + ".tmp", "w") as fh:
    fh.write(f"{os.getpid()}\\n")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(300)
"""


def scrubbed_daemon(prompt: str) -> None:
    """setsid + double fork + an empty environment (exec'd with ``env={}``), as a daemon that
    strips its environment does; FAKE_NONDUMPABLE=1 also makes it non-dumpable (as ssh-agent
    is: after the exec, which would make it dumpable again). The daemon writes FAKE_PIDFILE
    itself once it is so."""
    init()
    pidfile = os.environ["FAKE_PIDFILE"]
    hide = "1" if os.environ.get("FAKE_NONDUMPABLE") == "1" else "0"
    if os.fork() == 0:
        os.setsid()
        if os.fork():
            os._exit(0)
        _detach()
        os.execve(sys.executable, [sys.executable, "-c", DAEMON, pidfile, hide], {})
    os.wait()
    _wait_file(pidfile)
    text("scrubbed daemon started")
    if os.environ.get("FAKE_EXIT_AFTER_DAEMON") == "1":
        result("scrubbed daemon started")
        sys.exit(0)
    hang()

def catch_term(prompt: str) -> None:
    """Catches SIGTERM (a handler: SigCgt, not SigIgn), notes it in FAKE_SIGNALS, runs on."""
    path = os.environ.get("FAKE_SIGNALS", os.devnull)

    def caught(signum: int, frame: object) -> None:
        with open(path, "a") as fh:
            fh.write(f"{signum}\n")

    signal.signal(signal.SIGTERM, caught)
    init()
    text("catching SIGTERM")
    hang()


def ssh_agent(prompt: str) -> None:
    """Runs the real ``ssh-agent -s`` (setsid, fork, not dumpable) and leaves it running."""
    init()
    sock = os.environ["FAKE_SSH_SOCK"]
    out = subprocess.run(["ssh-agent", "-s", "-a", sock], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, check=True).stdout
    pid = int(out.split("SSH_AGENT_PID=")[1].split(";")[0])
    write_pidfile([pid])
    text("ssh-agent started")
    hang()


def tree(ignore: bool) -> None:
    if ignore:
        ignore_term_and_int()
    init()
    flag = "1" if ignore else "0"
    child = subprocess.Popen([sys.executable, "-c", LEVEL, "1", flag, LEVEL],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
    assert child.stdout is not None
    pids = [int(pid) for pid in child.stdout.readline().split()]
    write_pidfile(pids)
    text("tree ready")
    hang()


def tree3(prompt: str) -> None:
    tree(ignore=False)


def ignore_term_tree(prompt: str) -> None:
    tree(ignore=True)


def echo_stdin(prompt: str) -> None:
    init()
    data = sys.stdin.read()
    text(data)
    result(data)


def lines(prompt: str) -> None:
    for i in range(1, 6):
        write(f"line {i}\n".encode())
    code = os.environ.get("FAKE_EXIT_CODE")
    if code:
        print("oops", file=sys.stderr, flush=True)
        sys.exit(int(code))


def print_env(prompt: str) -> None:
    init()
    text(json.dumps({"TOLARIA_STREAM_ID": os.environ.get("TOLARIA_STREAM_ID"),
                     "argv": sys.argv}))
    result("printed env")


def ask(prompt: str) -> None:
    """Answers with a question and calls no tool: the turn waits for the operator."""
    init()
    text("Which file should I change?")
    result("Which file should I change?")


def hang_once(prompt: str) -> None:
    """Hangs silently the first time (marks ``FAKE_ONCE_FILE``), then behaves normally."""
    path = os.environ["FAKE_ONCE_FILE"]
    if not os.path.exists(path):
        with open(path, "w") as fh:
            fh.write(prompt)
        hang_mode(prompt)
    normal(prompt)


def edit_files(prompt: str) -> None:
    """Changes files in its working folder as ``FAKE_EDITS`` says (a JSON object: relative path
    -> new text, or null to delete it), then answers; hangs instead with ``FAKE_EDIT_HANG=1``
    (a turn stopped after it changed files)."""
    init()
    edits: dict[str, str | None] = json.loads(os.environ.get("FAKE_EDITS", "{}"))
    for path, content in edits.items():
        if content is None:
            os.remove(path)
        else:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w") as fh:
                fh.write(content)
    text(f"Edited {len(edits)} files.")
    if os.environ.get("FAKE_EDIT_HANG") == "1":
        hang()
    result(f"Edited {len(edits)} files.")


def ticker(prompt: str) -> None:
    """Numbered text blocks ("tick N", padded with FAKE_TICK_PAD bytes), one every FAKE_TICK_S
    seconds, FAKE_TICKS of them (default: on and on), with a tool in a new session: a long run
    whose output must arrive whole, with no gap and no duplicate, across reconnects."""
    init()
    start_session_tool()
    pad = "." * int(os.environ.get("FAKE_TICK_PAD", "0"))
    every = float(os.environ.get("FAKE_TICK_S", "0.02"))
    for i in range(int(os.environ.get("FAKE_TICKS", "100000000"))):
        text(f"tick {i}{pad}\n", f"msg_tick_{i}")
        time.sleep(every)
    result("ticked")


MODES: dict[str, Callable[[str], None]] = {
    "normal": normal, "slow_start": slow_start, "hang": hang_mode, "flood": flood,
    "oversized": oversized, "malformed": malformed, "crash": crash, "stderr_exit": stderr_exit,
    "error_result": error_result, "ignore_term": ignore_term, "tool": tool,
    "grandchild_stdout": grandchild_stdout, "daemon": daemon, "tree3": tree3,
    "ignore_term_tree": ignore_term_tree, "echo_stdin": echo_stdin, "lines": lines,
    "print_env": print_env, "ask": ask, "hang_once": hang_once,
    "dumpable_daemon": dumpable_daemon, "hopper": hopper, "catch_term": catch_term,
    "ssh_agent": ssh_agent, "edit_files": edit_files, "hopper_chain": hopper_chain,
    "hopper_chain_bare": hopper_chain_bare, "scrubbed_daemon": scrubbed_daemon,
    "ticker": ticker,
}


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FAKE_AGENT_MODE", "")
    prompt = sys.argv[2] if len(sys.argv) > 2 else ""
    run = MODES.get(mode)
    if run is None:
        print(f"usage: fake_agent.py MODE [PROMPT]  (or FAKE_AGENT_MODE=MODE)\n"
              f"unknown mode {mode!r}; modes: {', '.join(MODES)}", file=sys.stderr)
        return EX_USAGE
    run(prompt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
