"""The supervisor runs on the host's own Python (stdlib only, Python >= 3.8:
test_host_programs_static.py): a package, brought to the host as one deterministic zip built
from the files the wheel ships, and its frames. These checks need no sshd."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from tolaria.core.remote import bootstrap, bundle, supervisor

PACKAGE = Path(supervisor.__file__).parent


def test_the_hash_is_of_the_bundle_built_from_the_shipped_files() -> None:
    import hashlib

    fresh = bundle.build({name: data for name, data in bundle.sources().items()})
    assert bootstrap.supervisor_bytes() == fresh == bundle.build(bundle.sources())
    assert bootstrap.supervisor_hash() == hashlib.sha256(fresh).hexdigest()
    argv = bootstrap.remote_argv("python3")
    assert argv[:2] == ["python3", "-c"]
    assert argv[3:5] == [bootstrap.supervisor_hash(), str(len(fresh))]


def test_the_bundle_holds_the_shipped_files_and_runs_them() -> None:
    with zipfile.ZipFile(io.BytesIO(bootstrap.supervisor_bytes())) as zf:
        names = zf.namelist()
        assert names == sorted(names) and "__main__.py" in names
        shipped = {name: zf.read(name) for name in names if name != "__main__.py"}
        assert {info.date_time for info in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert shipped == bundle.sources()
    assert shipped == {f"{bundle.NAME}/{path.name}": path.read_bytes()  # byte for byte
                       for path in PACKAGE.glob("*.py")}
    assert {"__init__.py", "__main__.py", "frames.py", "loop.py", "main.py"} <= {
        name.rsplit("/", 1)[-1] for name in shipped}


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
