"""The process backend seam (tolaria/core/process/backend.py, ADR 0016): how one is chosen, and
that the two agree on what they both can read, about real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import cli_env

from tolaria.chats.run_config import prepare_run
from tolaria.config.overrides import AgentSettingsError
from tolaria.config.settings import Settings, load_settings, settings_path
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.process import backend, backend_base, watchdog
from tolaria.core.process.linux_backend import LinuxBackend
from tolaria.core.process.portable_backend import PortableBackend

_SLEEPER = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print(flush=True); time.sleep(60)")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A child in a session of its own, with a marker in its environment, ignoring SIGTERM."""
    proc = subprocess.Popen([sys.executable, "-c", _SLEEPER], stdout=subprocess.PIPE,
                            start_new_session=True,
                            env={**os.environ, "TOLARIA_STREAM_ID": "ai-agent-stream-seam"})
    assert proc.stdout is not None
    proc.stdout.readline()
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(5)
        proc.stdout.close()


@pytest.fixture
def unconfigured() -> Iterator[None]:
    yield
    backend.configure("auto")


def test_both_backends_read_the_same_process_alike(sleeper: subprocess.Popen[bytes]) -> None:
    linux, portable = LinuxBackend(), PortableBackend()
    found = linux.info(sleeper.pid)
    assert found is not None
    assert portable.info(sleeper.pid) == found
    assert (found.ppid, found.pgid, found.sid) == (os.getpid(), sleeper.pid, sleeper.pid)
    assert linux.start_ticks(sleeper.pid) == portable.start_ticks(sleeper.pid) == found.start
    for be in (linux, portable):
        env = be.environ(sleeper.pid)
        assert env is not None and b"\0TOLARIA_STREAM_ID=ai-agent-stream-seam" in b"\0" + env
        assert be.real_uid(sleeper.pid) == os.getuid()
        assert be.cmdline(sleeper.pid) == [sys.executable, "-c", _SLEEPER]
        assert be.cwd(sleeper.pid) == os.getcwd()
        assert be.group_and_session(sleeper.pid) == (sleeper.pid, sleeper.pid)
        assert sleeper.pid in be.pids()
        assert sleeper.pid in {p.pid for p in be.snapshot()}
        assert be.info(2**22 + 17) is None and be.environ(2**22 + 17) is None
    # One owner token for this process, whichever backend computes it (markers stay valid).
    backend_base.owner_cache.clear()
    token = linux.owner_token()
    backend_base.owner_cache.clear()
    assert portable.owner_token() == token
    # What only the linux backend can read: SigIgn, and the children lists.
    assert linux.ignores_signal(sleeper.pid, signal.SIGTERM) is True
    assert portable.ignores_signal(sleeper.pid, signal.SIGTERM) is False
    assert (linux.reads_signal_masks, portable.reads_signal_masks) == (True, False)
    assert sleeper.pid in (linux.children(os.getpid()) or [])
    assert portable.children(os.getpid()) is None
    assert portable.enable_subreaper() is False and portable.subreaper_active() is False


def test_the_backend_is_chosen_by_the_environment_then_the_setting(
        monkeypatch: pytest.MonkeyPatch, unconfigured: None) -> None:
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    assert backend.name() == backend.auto_name() == "linux"  # this machine has /proc
    backend.configure("portable")
    assert backend.name() == "portable"
    assert isinstance(backend.current(), PortableBackend)
    monkeypatch.setenv(backend.ENV_VAR, "linux")  # the environment wins
    assert backend.name() == "linux"
    assert isinstance(backend.current(), LinuxBackend)
    monkeypatch.setenv(backend.ENV_VAR, "Portable ")
    assert backend.name() == "portable"
    monkeypatch.setenv(backend.ENV_VAR, "bsd")
    assert backend.problem() == (f"{backend.ENV_VAR}='bsd' is not a process backend (one of "
                                 "auto, linux, portable)")
    assert isinstance(backend.current(), LinuxBackend)  # a stop still works: automatic
    with pytest.raises(backend.BackendChoiceError):
        backend.configure("solaris")
    assert backend._configured == "portable"  # a bad value leaves the choice as it was


def test_the_setting_is_read_checked_and_applied_to_runs(
        monkeypatch: pytest.MonkeyPatch, unconfigured: None) -> None:
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[behaviour]\nprocess_backend = "portable"\n')
    settings, problems = load_settings()
    assert problems == [] and settings.process_backend == "portable"
    manifest = Manifest(id="x", name="X", protocol="lines", command=("true",))
    prepare_run(manifest, settings=settings, overrides={})
    assert backend.name() == "portable"
    path.write_text('[behaviour]\nprocess_backend = "fast"\n')
    settings, problems = load_settings()
    assert settings.process_backend == "auto"
    assert problems == [f"{path}:2: behaviour.process_backend: must be one of 'auto', 'linux', "
                        "'portable', got 'fast'; using 'auto'"]
    prepare_run(manifest, settings=settings, overrides={})
    assert backend.name() == "linux"
    monkeypatch.setenv(backend.ENV_VAR, "nope")
    with pytest.raises(AgentSettingsError, match=r"^TOLARIA_PROCESS_BACKEND='nope' is not"):
        prepare_run(manifest, settings=Settings(), overrides={})


def test_tolaria_run_refuses_an_unknown_backend_in_one_line(tolaria_home: Path,
                                                            tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tolaria", "run", "--agent", "demo", "hi"],
                          env=cli_env(tolaria_home, TOLARIA_PROCESS_BACKEND="windows"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr == ("tolaria: TOLARIA_PROCESS_BACKEND='windows' is not a process backend "
                           "(one of auto, linux, portable)\n")
    assert done.stdout == ""


@pytest.mark.usefixtures("process_backend")
def test_the_watchdog_runs_with_the_apps_backend() -> None:
    """The watchdog process is told the app's backend (the setting may have chosen it), and
    with the linux one it starts without site-packages."""
    client = watchdog._Client()
    try:
        client.run_started("ai-agent-stream-w")
        pid = client.pid()
        assert pid is not None
        # Popen returns when exec has closed its error pipe, which the kernel does before it
        # lays out the new program's environment: /proc reads empty for that short while.
        deadline = time.monotonic() + 10
        while True:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            if (env != [b""] and argv != [b""]) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        name = backend.current().name
        assert f"{backend.ENV_VAR}={name}".encode() in env
        assert (b"-S" in argv) is (name == "linux")
    finally:
        client.run_ended("ai-agent-stream-w")
        client.close()
