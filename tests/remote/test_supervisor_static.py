"""The supervisor runs on the host's own Python (stdlib only, Python >= 3.8:
test_host_programs_static.py): one file, shipped in the wheel as the very bytes that are
hashed, and its frames. These checks need no sshd."""

from __future__ import annotations

from pathlib import Path

import pytest

from tolaria.core.remote import bootstrap, supervisor

SOURCE = Path(supervisor.__file__)


def test_the_hash_is_of_the_shipped_bytes() -> None:
    import hashlib

    assert bootstrap.supervisor_hash() == hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    argv = bootstrap.remote_argv("python3")
    assert argv[:2] == ["python3", "-c"]
    assert argv[3:5] == [bootstrap.supervisor_hash(), str(len(SOURCE.read_bytes()))]


def test_frames_survive_any_split() -> None:
    data = (supervisor.frame(supervisor.STDOUT, b"hello") + supervisor.frame(supervisor.HEARTBEAT)
            + supervisor.frame(supervisor.STDERR, b"x" * 70000))
    for size in (1, 3, 4096):
        reader = supervisor.FrameReader()
        frames = []
        for i in range(0, len(data), size):
            frames += reader.feed(data[i:i + size])
        assert frames == [(b"O", b"hello"), (b"H", b""), (b"R", b"x" * 70000)]


def test_an_oversized_frame_is_refused() -> None:
    with pytest.raises(ValueError, match="too large"):
        supervisor.FrameReader().feed(supervisor.HEADER.pack(b"O", supervisor.MAX_FRAME + 1))
