"""``tolaria run`` under a flood of Claude text deltas (issue 23, item 3): the batched output and
store keep every event, in order, byte for byte, and stop, SIGKILL and a closed reader behave
as before. The fake agent (tests/fakes/delta_flood_agent.py) prints the real partial-message
shape as fast as the pipe takes it, so most deltas take the dialect's fast path, some the JSON
parser; the output is flushed once per turn of the loop and the store buffers as before.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli.test_cli import EXIT_CANCELLED, ROOT
from helpers import add_fake_agent, cli_env, marker_pids

from tolaria.core.events import TextDelta
from tolaria.core.store.db import Store
from tolaria.core.stream_id import new_stream_id

AGENT = ROOT / "tests" / "fakes" / "delta_flood_agent.py"
from fakes import delta_flood_agent as flood  # noqa: E402

DELTAS = 6000  # per message: two messages, 12,000 deltas in all
TOOL = '\n[tool Bash: {"command": "ls -la"}]\n[tool done]\n'


def add_agent(home: Path, mode: str) -> str:
    return add_fake_agent(home, mode, AGENT)


def run(home: Path, cwd: Path, *args: str) -> tuple[int, bytes]:
    """``tolaria run ARGS`` with stdout and stderr on one file (their order kept as written)."""
    out = cwd / "out.bin"
    with out.open("wb") as fh:
        done = subprocess.run([sys.executable, "-m", "tolaria", "run", *args],
                              env=cli_env(home, FLOOD_DELTAS=str(DELTAS)), cwd=cwd,
                              stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                              timeout=120, check=False)
    return done.returncode, out.read_bytes()


def stored(home: Path, stream_id: str) -> tuple[str, list[str], str]:
    """The stored turn of ``stream_id``: its status, its event kinds, its answer text."""
    store = Store(next(home.rglob("tolaria.sqlite3")))
    try:
        turn = store.turn_by_stream(stream_id)
        assert turn is not None
        events = store.events(turn.id)
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        return turn.status, [e.kind for e in events], text
    finally:
        store.close()


def kinds_collapsed(kinds: list[str]) -> list[str]:
    return [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]


@pytest.mark.parametrize("save", [False, True])
def test_text_output_of_a_flood_is_every_delta_in_order_byte_for_byte(
        tolaria_home: Path, work: Path, save: bool) -> None:
    agent = add_agent(tolaria_home, "mixed")
    stream_id = new_stream_id()
    code, out = run(tolaria_home, work, "--agent", agent, "--stream-id", stream_id,
                    *([] if save else ["--no-save"]), "go")
    first, second = "".join(flood.texts(DELTAS)), "".join(flood.texts(DELTAS, start=DELTAS))
    answer = first + TOOL + "\n\n" + second + "\n"
    assert code == 0, out[-2000:]
    text = out.decode()
    assert text.startswith(answer), text[len(answer) - 200:len(answer) + 200]
    tail = text[len(answer):]
    assert re.fullmatch(r"\[done: end_turn, \d+ ms\]\n"
                        + (r"tolaria: saved in chat \d+ \(continue it with --chat \d+\)\n"
                           if save else ""), tail), tail
    if save:
        status, kinds, stored_text = stored(tolaria_home, stream_id)
        assert status == "completed"
        assert stored_text == first + second
        assert kinds_collapsed(kinds) == ["init", "text_delta", "tool_start", "tool_done",
                                          "text_delta", "usage", "done"]


def test_text_and_tool_lines_go_to_their_own_streams(tolaria_home: Path, work: Path) -> None:
    agent = add_agent(tolaria_home, "mixed")
    done = subprocess.run([sys.executable, "-m", "tolaria", "run", "--agent", agent, "--no-save",
                           "go"], env=cli_env(tolaria_home, FLOOD_DELTAS=str(DELTAS)), cwd=work,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = "".join(flood.texts(DELTAS)), "".join(flood.texts(DELTAS, start=DELTAS))
    assert done.stdout.decode() == first + "\n\n" + second + "\n"
    assert re.fullmatch(re.escape(TOOL) + r"\[done: end_turn, \d+ ms\]\n", done.stderr.decode())


def test_json_output_of_a_flood_has_every_event_in_order(tolaria_home: Path,
                                                         work: Path) -> None:
    agent = add_agent(tolaria_home, "mixed")
    code, out = run(tolaria_home, work, "--agent", agent, "--no-save", "--json", "go")
    assert code == 0, out[-2000:]
    events = [json.loads(line) for line in out.decode().splitlines()]
    kinds = [e["kind"] for e in events]
    texts = flood.texts(DELTAS) + flood.texts(DELTAS, start=DELTAS)
    assert [e["text"] for e in events if e["kind"] == "text_delta"] == texts
    assert kinds == (["init"] + ["text_delta"] * DELTAS + ["tool_start", "tool_done"]
                     + ["text_delta"] * DELTAS + ["usage", "done"])
    # Each line exactly as the generic encoder writes it (the deltas take a shortcut).
    assert out.decode().splitlines()[1] == json.dumps(events[1], ensure_ascii=False)


class Endless:
    """``tolaria run`` (saved, plain text) of the endless flood, stdout read by a thread."""

    def __init__(self, home: Path, cwd: Path) -> None:
        self.stream_id = new_stream_id()
        agent = add_agent(home, "endless")
        self.out_path = cwd / "out.txt"
        self.out = self.out_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tolaria", "run", "--grace", "0.5", "--stream-id",
             self.stream_id, "--agent", agent, "go"], env=cli_env(home), cwd=cwd,
            stdin=subprocess.DEVNULL, stdout=self.out, stderr=subprocess.PIPE)

    def printed(self) -> str:
        return self.out_path.read_text()

    def wait_printed(self, chars: int) -> None:
        deadline = time.monotonic() + 60
        while len(self.printed()) < chars:
            assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
            assert time.monotonic() < deadline, "the flood did not come"
            time.sleep(0.02)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(20)
        self.out.close()
        for pid in marker_pids(self.stream_id):  # the agent, after a SIGKILL of tolaria
            os.kill(pid, signal.SIGKILL)


def assert_in_order(text: str) -> None:
    numbers = [int(n) for n in re.findall(r"<(\d+)> ", text)]
    assert numbers == list(range(len(numbers)))
    assert "".join(f"<{n}> " for n in numbers) == text[:len("".join(f"<{n}> "
                                                                    for n in numbers))]


def test_stop_during_a_flood_ends_it_cancelled_with_what_was_printed_kept(
        tolaria_home: Path, work: Path) -> None:
    run = Endless(tolaria_home, work)
    try:
        run.wait_printed(200_000)
        run.proc.send_signal(signal.SIGINT)
        assert run.proc.wait(30) == EXIT_CANCELLED
        printed = run.printed()
        assert marker_pids(run.stream_id) == []
    finally:
        run.close()
    status, kinds, text = stored(tolaria_home, run.stream_id)
    assert status == "cancelled"
    assert kinds[-1] == "done"
    assert len(text) >= 200_000
    assert_in_order(text)
    assert printed.startswith(text)  # all that was stored was printed, the same
    assert printed[len(text):] == "\n"  # and all that was printed was stored


def test_a_sigkill_mid_flood_keeps_what_was_printed_up_to_the_last_flushes(
        tolaria_home: Path, work: Path) -> None:
    run = Endless(tolaria_home, work)
    try:
        run.wait_printed(200_000)
        before = len(run.printed())
        time.sleep(0.5)  # ten flush intervals of the store (50 ms)
        run.proc.kill()
        run.proc.wait(20)
        printed = run.printed()
    finally:
        run.close()
    status, _, text = stored(tolaria_home, run.stream_id)
    assert status == "interrupted"
    assert_in_order(text)
    assert printed.startswith(text)
    assert len(text) >= before  # everything printed half a second before the kill is stored
