"""Hostile config files (issue 14, case 8): a FIFO as an adapter or settings.toml, a symlink to
/dev/zero, a huge file. Before: ``tolaria agents`` / ``tolaria run`` hung on the FIFO for good or
read /dev/zero without limit. Now each such file is refused with one clear line naming it, and
the command goes on. Real FIFOs, real devices, the real CLI in a child process with a timeout."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tolaria.config.settings import load_settings
from tolaria.core.adapters.manifest import load_adapters
from tolaria.support import tomlfile

ROOT = Path(__file__).resolve().parents[2]
ECHO_ADAPTER = 'id = "echoer"\nname = "Echo"\nprotocol = "lines"\ncommand = ["echo", "{prompt}"]\n'


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    env.update(TOLARIA_HOME=str(home), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tolaria", *args], env=env, cwd=home,
                          capture_output=True, text=True, timeout=60, check=False,
                          stdin=subprocess.DEVNULL)


def _hostile_home(home: Path, kind: str) -> Path:
    """``home`` with a working adapter plus one hostile ``adapters/x.toml`` and settings.toml."""
    adapters = home / "adapters"
    adapters.mkdir(exist_ok=True)
    (adapters / "echoer.toml").write_text(ECHO_ADAPTER)
    for path in (adapters / "x.toml", home / "settings.toml"):
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")
    return adapters / "x.toml"


@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_agents_and_run_refuse_a_fifo_or_dev_zero_and_go_on(tolaria_home: Path,
                                                            kind: str) -> None:
    hostile = _hostile_home(tolaria_home, kind)
    what = "a FIFO" if kind == "fifo" else "a character device"
    started = time.monotonic()
    agents = _cli(tolaria_home, "agents")
    assert agents.returncode == 0, agents.stderr
    assert f"{hostile}: not a regular file ({what})" in agents.stdout
    assert "echoer" in agents.stdout

    run = _cli(tolaria_home, "run", "--agent", "echoer", "--no-save", "hello")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "hello"
    assert f"{hostile}: not a regular file ({what})" in run.stderr
    assert f"{tolaria_home / 'settings.toml'}: not a regular file ({what})" in run.stderr
    assert "Traceback" not in run.stderr
    assert time.monotonic() - started < 50  # both commands, each bounded by the timeout above


def test_a_huge_file_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    big = tmp_path / "settings.toml"
    with big.open("wb") as fh:
        fh.truncate(64 * 1024 * 1024)  # sparse: 64 MiB of NULs, no disk used
    with pytest.raises(tomlfile.SettingsFileError, match=r"too large .* the limit is 1048576"):
        tomlfile.read(big)
    _settings, warnings = load_settings(big)
    assert any(str(big) in w and "too large" in w for w in warnings), warnings


def test_a_fifo_with_a_writer_is_still_refused(tmp_path: Path) -> None:
    """A FIFO that someone feeds: refused by its type, nothing read, nothing blocks."""
    folder = tmp_path / "adapters"
    folder.mkdir()
    fifo = folder / "fed.toml"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"yes 'id = \"x\"' > {fifo}"])
    try:
        found = load_adapters(builtin_dir=tmp_path / "none", user_dir=folder)
    finally:
        writer.kill()
        writer.wait()
    assert [e.path for e in found.errors] == [fifo]
    assert "not a regular file (a FIFO)" in str(found.errors[0])


def test_a_symlink_to_a_regular_file_still_works(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text(ECHO_ADAPTER)
    folder = tmp_path / "adapters"
    folder.mkdir()
    (folder / "echoer.toml").symlink_to(real)
    found = load_adapters(builtin_dir=tmp_path / "none", user_dir=folder)
    assert not found.errors
    assert found.get("echoer").command == ("echo", "{prompt}")
