"""Tolaria on macOS and Windows, as far as Linux can show it (issue 24 items 3 and 5).

Each platform is faked in its own subprocess (tests/platform_probe.py): ``sys.platform`` is
set to darwin or win32 after the standard library and third parties are loaded, then every
Tolaria module is imported, Qt ones too (offscreen). Windows refuses to start runs with one
line pointing at ADR 0014, from ``tolaria run`` (exit 2) and in the window (a notice, the
prompt kept), rather than running with a weaker Stop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from platform_probe import POSIX_PROGRAMS

from tolaria.support import platforms, sockdir

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "tests" / "platform_probe.py"
ADR = ROOT / platforms.WINDOWS_ADR


def _probe(*args: str, home: Path, timeout: float = 120) -> dict[str, object]:
    env = {**os.environ, "TOLARIA_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_every_module_imports_with_the_platform_faked(platform: str, tmp_path: Path) -> None:
    answer = _probe(platform, home=tmp_path)
    failed = dict(answer["failed"])  # type: ignore[call-overload]
    if platform == "win32":
        for name in POSIX_PROGRAMS:
            assert "the supervisor runs on POSIX hosts" in failed.pop(name, ""), name
    assert failed == {}, "\n".join(f"{name}:\n{tb}" for name, tb in failed.items())
    imported = answer["imported"]
    assert isinstance(imported, list)
    # every module of the package (but __main__, which runs the CLI), the Qt ones included
    expected = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                for p in (ROOT / "tolaria").rglob("*.py")} - {"tolaria.__main__"}
    if platform == "win32":
        expected -= POSIX_PROGRAMS
    assert set(imported) == expected
    assert {"tolaria.ui.window.main_window", "tolaria.app.main", "tolaria.qt.loop"} <= set(imported)
    probes = answer["probes"]
    assert isinstance(probes, dict)
    # the fake reached Tolaria's code, at call time and at import time
    if platform == "win32":
        assert probes["run_refusal"] == platforms.RUNS_REFUSED_ON_WINDOWS
        assert probes["control_channel"] is False
        assert probes["listed_next_chat"] == "Ctrl+Tab"
    else:
        assert probes["run_refusal"] is None
        assert probes["control_channel"] is True
        assert probes["next_chat"] == ["Meta+Tab", "Ctrl+}"]
        assert probes["delete_chat"] == ["Ctrl+Backspace", "Del"]
        assert probes["listed_next_chat"] == "Meta+Tab / Ctrl+}"
    assert probes["socket_dir_fits"] is True


def test_the_refusal_is_one_line_that_names_an_adr_that_exists() -> None:
    line = platforms.RUNS_REFUSED_ON_WINDOWS
    assert "\n" not in line and len(line) < 160
    assert platforms.WINDOWS_ADR in line
    assert ADR.is_file()
    assert "Job Object" in ADR.read_text()
    assert platforms.run_refusal() is None  # on this (Linux) machine runs go ahead


_FAKED_RUN = """
import sys
sys.path.insert(0, "tests")
import platform_probe
platform_probe.preload()  # the standard library as on Linux (asyncio would load _overlapped)
sys.platform = "win32"
from tolaria.cli.main import main
sys.exit(main(["run", "--agent", "demo", "list the files"]))
"""


def test_tolaria_run_on_windows_refuses_with_one_line_and_exit_2(tmp_path: Path) -> None:
    home = tmp_path / "faked-home"
    home.mkdir()
    env = {**os.environ, "TOLARIA_HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", _FAKED_RUN], capture_output=True, text=True,
                          env=env, timeout=60, cwd=ROOT, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"tolaria: {platforms.RUNS_REFUSED_ON_WINDOWS}\n"
    assert done.stdout == ""
    # refused before anything: no chat stored, no socket folder, no agent started
    assert list(home.iterdir()) == []


def test_the_window_on_windows_says_so_and_keeps_the_prompt(tmp_path: Path) -> None:
    answer = _probe("win32", "--window", home=tmp_path / "home")
    line = platforms.RUNS_REFUSED_ON_WINDOWS
    assert answer["stream_id"] is None  # not started
    assert answer["status_message"] == line  # said when Send is pressed
    assert answer["problems"] == f"⚠ {line}"  # and from the start, in the window's notices
    assert answer["composer"] == "list the files"  # nothing lost
    assert answer["turns"] == 0 and answer["live_runs"] == 0
    assert answer["control_started"] is False  # no AF_UNIX there (ADR 0014: named pipes)
    assert answer["socket"] is False


def test_the_window_on_macos_starts_its_control_socket(tmp_path: Path) -> None:
    answer = _probe("darwin", "--window", home=tmp_path / "home")
    assert answer["control_started"] is True and answer["socket"] is True
    assert answer["problems"] == ""


# -- the socket folder's length rule (sun_path: 104 bytes on macOS) ------------------------------

def _socket_dir(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    return sockdir.socket_dir()


def test_a_short_home_keeps_its_own_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    home = tmp_path / "h"
    assert _socket_dir(monkeypatch, TOLARIA_HOME=str(home)) == os.path.realpath(home / "run")


def test_a_long_home_gets_a_short_hashed_folder_that_fits_macos(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / ("deep-" * 20)
    folder = _socket_dir(monkeypatch, TOLARIA_HOME=str(home))
    socket_path = os.path.join(folder, f"{2**32 - 1}.sock")  # the longest pid
    assert len(os.fsencode(socket_path)) < 104  # macOS's sun_path, NUL included
    assert os.path.basename(folder).startswith(f"tolaria-{os.getuid()}-")
    # the same home always gives the same folder (every process must agree), another one not
    assert _socket_dir(monkeypatch, TOLARIA_HOME=str(home)) == folder
    assert _socket_dir(monkeypatch, TOLARIA_HOME=str(home) + "x") != folder


def test_the_length_is_counted_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A home whose ``run`` folder is 80 characters but 140 bytes (UTF-8 "ü"): counted in
    characters it passed, and no socket could be bound in it."""
    import shutil
    import socket
    import tempfile

    base = tempfile.mkdtemp(dir="/tmp")  # short, whatever pytest's tmp_path is
    try:
        home = os.path.join(base, "ü" * (sockdir.MAX_SOCKET_DIR - len(base) - len("//run")))
        natural = os.path.join(home, "run")
        assert len(natural) <= sockdir.MAX_SOCKET_DIR < len(os.fsencode(natural))
        os.makedirs(natural)
        with socket.socket(socket.AF_UNIX) as sock, pytest.raises(OSError, match="too long"):
            sock.bind(os.path.join(natural, f"{os.getpid()}.sock"))
        folder = _socket_dir(monkeypatch, TOLARIA_HOME=home)
        assert folder != natural and len(os.fsencode(folder)) <= sockdir.MAX_SOCKET_DIR
    finally:
        shutil.rmtree(base)


def test_a_long_tmpdir_falls_back_to_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long_tmp = tmp_path / ("t" * 90)
    long_tmp.mkdir()
    folder = _socket_dir(monkeypatch, TOLARIA_HOME=str(tmp_path / ("h" * 90)),
                         TMPDIR=str(long_tmp))
    assert os.path.dirname(folder) == sockdir.SHORT_TMP
    assert len(os.fsencode(os.path.join(folder, "4294967295.sock"))) < 104


def test_a_server_really_listens_under_a_long_home(tmp_path: Path) -> None:
    """End to end: ``tolaria streams`` of a long TOLARIA_HOME finds nothing and fails nowhere,
    and the folder it would use is one a socket can be bound in."""
    import socket

    home = tmp_path / ("deep-" * 20)
    env = {**os.environ, "TOLARIA_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "tolaria", "streams", "--json"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
    folder = subprocess.run([sys.executable, "-c", "from tolaria.support import sockdir; "
                             "print(sockdir.socket_dir())"], capture_output=True, text=True,
                            env=env, timeout=60, check=True).stdout.strip()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, f"{2**32 - 1}.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
    os.unlink(path)
    os.rmdir(folder)
