"""How ``tolaria abort`` recognises a ``tolaria run --stream-id ID`` that does not listen yet
(tolaria/core/process/claim.py): the run's own arguments, and real processes found by their
command line (``/proc`` and the portable ``ps`` fallback)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from helpers import cli_env

from tolaria.core.process import claim, control_client
from tolaria.core.stream_id import new_stream_id

ID = "ai-agent-stream-0123abcd"
TESTS = Path(__file__).resolve().parents[2]
GATE_DIR = TESTS / "fakes" / "gate"
SCRIPT = TESTS.parent / "scripts" / "tolaria"


@pytest.mark.parametrize(("args", "expected"), [
    (["run", "--stream-id", ID, "hi"], ID),
    (["run", f"--stream-id={ID}", "hi"], ID),
    (["run", "--agent", "demo", "hi", "--stream-id", ID], ID),  # options after the prompt
    (["run", "--stream", ID, "hi"], ID),  # argparse takes an unambiguous prefix
    (["run", "--st", ID, "hi"], ID),
    (["run", "--s", ID, "hi"], None),  # ambiguous (--ssh-config): argparse refuses it too
    (["--agent", "demo", "--cwd=/tmp", "run", "--stream-id", ID, "hi"], ID),
    (["run", "--chat", "3", "--grace", "1", "--json", "--no-save", "--stream-id", ID, "x"], ID),
    (["run", "--agent", "--stream-id", "hi"], None),  # the agent is called --stream-id
    (["run", "--", "--stream-id", ID], None),  # after --: the prompt
    (["run", "--stream-id", "not-an-id", "hi"], None),
    (["run", "--stream-id"], None),
    (["run", "hi"], None),
    (["abort", ID], None),
    (["--agent", "run"], None),  # the window, with an agent called run
    (["chats", "run", "--stream-id", ID], None),
    ([], None),
])
def test_the_stream_id_of_a_run_command_line(args: list[str], expected: str | None) -> None:
    assert claim.run_stream_id(args) == expected


@pytest.mark.parametrize(("argv", "expected"), [
    (["/venv/bin/tolaria", "run"], ["run"]),
    (["/usr/bin/python3", "/venv/bin/tolaria", "run"], ["run"]),  # the script's shebang
    (["python3.11", "-X", "importtime", "-u", "/x/tolaria", "abort", ID], ["abort", ID]),
    (["python", "-m", "tolaria", "run"], ["run"]),
    (["python", "-mtolaria", "run"], ["run"]),
    (["python", "-c", "from tolaria.cli.main import main; main()", "run"], ["run"]),
    (["python", "-c", "print(1)", "run"], None),
    (["python", "-m", "pytest", "run"], None),
    (["python", "/x/other.py", "tolaria", "run"], None),
    (["sh", "-c", f"tolaria run --stream-id {ID} hi"], None),
    (["bash", "tolaria", "run"], None),
    ([], None),
])
def test_a_tolaria_command_line_is_recognised(argv: list[str],
                                              expected: list[str] | None) -> None:
    assert claim.tolaria_args(argv) == expected


@pytest.fixture
def held(tolaria_home: Path, tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started by the test, held before their first line of Tolaria (the gate is
    never opened); killed at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait(10)


def _held(procs: list[subprocess.Popen[bytes]], argv: list[str], home: Path,
          gate: Path) -> subprocess.Popen[bytes]:
    env = cli_env(home, TOLARIA_TEST_GATE=str(gate))
    env["PYTHONPATH"] = os.pathsep.join([str(GATE_DIR), env["PYTHONPATH"]])
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    procs.append(proc)
    # Popen returns once the exec began: for a moment after, the kernel has no command line
    # for the new image yet (an empty read). Every case below is about a process past that.
    deadline = time.monotonic() + 10
    while not psutil.Process(proc.pid).cmdline():
        assert time.monotonic() < deadline, "the held process never got its command line"
        time.sleep(0.001)
    return proc


@pytest.mark.usefixtures("process_backend")
def test_runs_are_found_by_their_command_line_before_they_run_tolaria(
        held: list[subprocess.Popen[bytes]], tolaria_home: Path, tmp_path: Path) -> None:
    sid = new_stream_id()
    gate = tmp_path / "never"
    other_home = tmp_path / "other-home"
    other_home.mkdir()
    by_module = _held(held, [sys.executable, "-m", "tolaria", "run", "--stream-id", sid,
                             "--agent", "demo", "a prompt with blanks"], tolaria_home, gate)
    by_script = _held(held, [sys.executable, str(SCRIPT), "run", "--agent", "demo", "hi",
                             f"--stream-id={sid}"], tolaria_home, gate)
    # Not runs of this id in this home: another program naming it, an abort of it, another
    # id, and the same id in another TOLARIA_HOME (another Tolaria's socket folder).
    _held(held, [sys.executable, "-c", "import time; time.sleep(60)", "tolaria", "run",
                 "--stream-id", sid], tolaria_home, gate)
    _held(held, [sys.executable, "-m", "tolaria", "abort", sid], tolaria_home, gate)
    _held(held, [sys.executable, "-m", "tolaria", "run", "--stream-id", new_stream_id(), "x"],
          tolaria_home, gate)
    elsewhere = _held(held, [sys.executable, "-m", "tolaria", "run", "--stream-id", sid, "x"],
                      other_home, gate)
    assert sorted(claim.find_runs(sid)) == sorted([by_module.pid, by_script.pid])
    assert claim.find_runs(new_stream_id()) == []
    assert elsewhere.pid not in claim.find_runs(sid)
    assert claim.start_ticks(by_module.pid) is not None
    assert claim.start_ticks(2**22 + 12345) is None


@pytest.mark.usefixtures("process_backend")
def test_a_run_whose_command_line_spans_pages_is_found(
        held: list[subprocess.Popen[bytes]], tolaria_home: Path, tmp_path: Path) -> None:
    """The id after a prompt of 10,000 bytes: the command line is read past its first page
    (procread.read_strings), also when a page ends exactly where the arguments do."""
    sid = new_stream_id()
    gate = tmp_path / "never"
    prompt = "x" * 10_000
    long_one = _held(held, [sys.executable, "-m", "tolaria", "run", prompt, "--stream-id", sid],
                     tolaria_home, gate)
    head = [sys.executable, "-m", "tolaria", "run", "--stream-id", sid, ""]
    fill = 8192 - len(b"\0".join(os.fsencode(a) for a in head)) - 1  # 2 pages with its NUL
    exact = _held(held, [*head[:-1], "y" * fill], tolaria_home, gate)
    if sys.platform == "linux":  # elsewhere psutil reads them
        with open(f"/proc/{exact.pid}/cmdline", "rb") as fh:
            assert len(fh.read()) == 8192
    assert sorted(claim.find_runs(sid)) == sorted([long_one.pid, exact.pid])


def test_the_claim_listens_at_once_and_is_released(tolaria_home: Path) -> None:
    """In this process: ``claim_run`` listens on ``<pid>.claim`` (mode 0600 in a 0700
    folder); nothing claims for other commands; ``release`` removes it."""
    assert claim.claim_run(["abort", ID]) is None
    assert claim.claim_run(["run", "hi"]) is None
    path = claim.claim_run(["run", "--stream-id", ID, "hi"])
    try:
        assert path == str(tolaria_home / "run" / f"{os.getpid()}.claim")
        assert os.stat(tolaria_home / "run").st_mode & 0o777 == 0o700
        assert os.stat(path).st_mode & 0o777 == 0o600
        import socket

        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(path)  # queued: nobody accepts yet, the connect still succeeds
        client.close()
        assert claim.take(str(tolaria_home / "run" / "1.sock")) is None  # not that one
    finally:
        claim.release()
    assert not os.path.exists(path)


def test_a_loose_socket_folder_is_tightened_and_claimed(tolaria_home: Path) -> None:
    """A socket folder left 0755 (an older install, a umask): the claim makes it 0700 through
    a descriptor, as the ControlServer's folder check does, instead of not claiming at all."""
    folder = tolaria_home / "run"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    path = claim.claim_run(["run", "--stream-id", ID, "hi"])
    try:
        assert path == str(folder / f"{os.getpid()}.claim")
        assert os.stat(folder).st_mode & 0o777 == 0o700
    finally:
        claim.release()


def test_the_option_lists_match_the_real_parser() -> None:
    """claim.py reads ``tolaria``'s arguments before argparse is imported, so it keeps its own
    list of options: it must be argparse's (a new option with a value would shift the scan)."""
    import argparse

    from tolaria.cli.main import _parser

    def options(parser: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
        valued: set[str] = set()
        flags: set[str] = set()
        for action in parser._actions:
            names = {o for o in action.option_strings if o.startswith("--")}
            if isinstance(action, argparse._SubParsersAction) or not names:
                continue
            (valued if action.nargs != 0 else flags).update(names)
        return valued, flags

    top = _parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    assert options(top) == (set(claim._TOP_VALUED), set(claim._TOP_FLAGS))
    assert options(sub.choices["run"]) == (set(claim._RUN_VALUED), set(claim._RUN_FLAGS))


#: A process whose command line is a ``tolaria run --stream-id ID`` (``python -c`` of code
#: naming tolaria) and that listens like one whose run has just ended (its registry has none):
#: it counts the requests it answers and prints the count when its stdin closes.
_ENDED_RUN = """
import asyncio, sys
from tolaria.core.process.control import ControlServer
from tolaria.core.process.registry import ProcessRegistry

class Counting(ControlServer):
    asked = 0

    async def _answer(self, line):
        Counting.asked += 1
        return await super()._answer(line)

async def main():
    server = Counting(ProcessRegistry())
    await server.start()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.close()
    print(Counting.asked, flush=True)

asyncio.run(main())
"""


def test_a_listening_run_that_says_no_is_asked_once(tolaria_home: Path) -> None:
    """The abort finds the run's process by its command line too, but that process has
    already answered (false: its run is over): it is not waited for and asked again."""
    sid = new_stream_id()
    proc = subprocess.Popen([sys.executable, "-c", _ENDED_RUN, "run", "--stream-id", sid, "hi"],
                            env=cli_env(tolaria_home), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        assert claim.find_runs(sid) == [proc.pid]
        assert control_client.abort_remote(sid, timeout=10) is False
        out, _ = proc.communicate("", timeout=30)
        assert out.strip() == "1"
    finally:
        proc.kill()
        proc.wait(10)
