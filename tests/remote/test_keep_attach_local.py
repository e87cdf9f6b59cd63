"""Keep-running pieces that need no sshd (ADR 0032): the output ring's replay from an offset,
and the supervisor's attach mode refusing a bad stream id or a run it does not have."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tolaria.core.remote import bootstrap, supervisor
from tolaria.core.remote.supervisor import ATTACH, ATTACHED, FAILED, READY, STDERR, STDOUT
from tolaria.core.remote.supervisor.keep import Keep, socket_path
from tolaria.core.stream_id import new_stream_id


def _frames(data: bytes) -> list[tuple[bytes, bytes]]:
    return supervisor.FrameReader().feed(data)


def test_the_replay_resumes_at_the_offset_without_gap_or_duplicate() -> None:
    keep = Keep()
    keep.remember(STDOUT, b"line 0\nline 1\n")
    keep.remember(STDERR, b"warn\n")
    keep.remember(STDOUT, b"line 2\n")
    for offset in range(keep.total + 1):
        frames = _frames(keep.replay(offset))
        assert frames[0][0] == ATTACHED
        head = json.loads(frames[0][1])
        assert head == {"from": offset, "total": keep.total, "dropped": 0}
        assert b"".join(p for _, p in frames[1:]) == b"line 0\nline 1\nwarn\nline 2\n"[offset:]
    assert [k for k, _ in _frames(keep.replay(8))[1:]] == [STDOUT, STDERR, STDOUT]


def test_an_overflowing_ring_says_what_it_dropped_and_resumes_at_a_whole_line() -> None:
    keep = Keep()
    keep.cap = 20
    for i in range(10):
        keep.remember(STDOUT, f"tick {i}\n".encode())  # 7 bytes each
    frames = _frames(keep.replay(0))
    head = json.loads(frames[0][1])
    assert head["dropped"] > 0 and head["total"] == 70
    text = b"".join(p for _, p in frames[1:]).decode()
    assert text.startswith("tick ") and text.endswith("tick 9\n")
    ticks = [int(line.split()[1]) for line in text.splitlines()]
    assert ticks == list(range(ticks[0], 10))
    assert head["from"] == 7 * ticks[0] == head["dropped"]  # the offset the link goes on from
    keep.ring.clear()  # a ring cut in the middle of a line resumes at the next one
    keep.clean, keep.total = False, 0
    keep.remember(STDOUT, b"ck 3\ntick 4\n")
    keep.ring[0] = (50, STDOUT, b"ck 3\ntick 4\n")
    keep.total = 62
    frames = _frames(keep.replay(40))
    assert json.loads(frames[0][1]) == {"from": 55, "total": 62, "dropped": 15}
    assert frames[1][1] == b"tick 4\n"


def _oldest_python() -> str | None:
    """The oldest Python here that the supervisor supports (3.8), None when there is none."""
    found = shutil.which("python3.8")
    if found and subprocess.run([found, "-c", ""], capture_output=True, check=False).returncode:
        found = None  # a version manager's shim for a version it does not select
    home = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
    return found or (str(home[0]) if home else None)


def _attach(stream_id: str, python: str = sys.executable) -> dict[str, object]:
    """The supervisor's bundle, as the host gets it, run here in attach mode: its READY, then
    its answer to ATTACH."""
    folder = Path(tempfile.mkdtemp(prefix="tolaria-bundle-"))
    program = folder / f"supervisor-{bootstrap.supervisor_hash()}.pyz"
    program.write_bytes(bootstrap.supervisor_bytes())
    proc = subprocess.Popen([python, str(program)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        out, _ = proc.communicate(supervisor.frame(ATTACH, json.dumps(
            {"stream_id": stream_id, "offset": 0}).encode()), timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder)
    frames = _frames(out)
    assert frames[0][0] == READY
    assert frames[1][0] == FAILED, frames
    answer: dict[str, object] = json.loads(frames[1][1])
    return answer


def test_attach_refuses_a_bad_stream_id() -> None:
    for bad in ("../../etc/passwd", "ai-agent-stream-", "ai-agent-stream-a/b", "x" * 200,
                "ai-agent-stream-ünï"):
        answer = _attach(bad)
        assert "not a stream id" in str(answer["message"]), answer
        assert socket_path(bad) is None


def test_attach_to_a_run_the_host_does_not_have_says_it_is_gone() -> None:
    answer = _attach(new_stream_id())
    assert answer.get("gone") is True
    assert "gone" in str(answer["message"])


def test_the_bundle_runs_on_the_oldest_python_it_supports() -> None:
    python = _oldest_python()
    if python is None:
        pytest.skip("no Python 3.8 on this machine")
    for bad in ("../../etc/passwd", "ai-agent-stream-a/b"):
        assert "not a stream id" in str(_attach(bad, python)["message"])
    answer = _attach(new_stream_id(), python)
    assert answer.get("gone") is True, answer


def test_the_bundle_tells_a_windows_host_it_is_not_supported(tmp_path: Path) -> None:
    program = tmp_path / "supervisor.pyz"
    program.write_bytes(bootstrap.supervisor_bytes())
    run_as_windows = ("import runpy, sys; sys.platform = 'win32'; "
                      "runpy.run_path(sys.argv[1], run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", run_as_windows, str(program)],
                          capture_output=True, timeout=30, check=False)
    assert (done.returncode, done.stdout) == (7, b"TOLARIA-ERROR Windows hosts are not supported "
                                                 b"yet (use WSL: exec:wsl -d Ubuntu --)\n")
