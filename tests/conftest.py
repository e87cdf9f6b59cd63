"""Shared fixtures. Every test runs with its own TOLARIA_HOME and must leave no process behind."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

if TYPE_CHECKING:
    from tolaria.core.store.db import Store

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parent.parent
FAKE_AGENT = ROOT / "tests" / "fakes" / "fake_agent.py"
FIXTURES = ROOT / "tests" / "fixtures"


def marked_processes(home_prefix: str | None = None) -> list[psutil.Process]:
    """Live (non-zombie) processes that carry TOLARIA_STREAM_ID: agent processes of some run.

    With ``home_prefix``, only those whose TOLARIA_HOME lies under it (this test session's temp
    folder), so a benchmark or a real Tolaria running on the same machine is not counted.
    """
    found = []
    home_needle = f"TOLARIA_HOME={home_prefix}".encode() if home_prefix else None
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if b"TOLARIA_STREAM_ID=" not in env:
            continue
        if home_needle is not None and not any(v.startswith(home_needle) for v in env.split(b"\0")):
            continue
        try:
            proc = psutil.Process(int(entry))
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _is_watchdog(proc: psutil.Process) -> bool:
    """The app's one long-lived watchdog (tolaria.core.process.watchdog): not a leak."""
    try:
        with open(f"/proc/{proc.pid}/environ", "rb") as fh:
            return b"TOLARIA_WATCHDOG=1" in fh.read().split(b"\0")
    except OSError:
        return False


def _live_children() -> list[psutil.Process]:
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and not _is_watchdog(child):
                out.append(child)
        except psutil.Error:
            continue
    return out


def _zombie_children() -> set[int]:
    """Children of the test process that exited and were never reaped (waitpid)."""
    out = set()
    for child in psutil.Process().children():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                out.add(child.pid)
        except psutil.Error:
            continue
    return out


def _reap(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except OSError:
            continue


def _left_zombies(before: set[int]) -> list[str]:
    """New zombie children at the end of a test, reaped here; those outside our own session
    (what runs leave) described for the failure.

    The test process is a child subreaper (a registry made it one): orphans of what a test
    started come back to it, and nobody else will ever reap them. A test that leaves them
    (a pid hopper's generations, an app it SIGKILLed) fills the pid table: pid_max may be
    32,768, and a run of this suite once left 32,366 zombies behind, after which every test
    failed. Popen objects nobody waited for are collected first (their zombies are theirs)."""
    import gc
    import subprocess

    gc.collect()
    subprocess._cleanup()  # type: ignore[attr-defined]  # reaps abandoned Popen children
    # A waiter of its own (asyncio's watcher) may still be at it, and the app's background
    # reaper (tolaria/core/process/freeze.py) takes adopted ones once they are 0.5 s old.
    deadline = time.monotonic() + 1.5
    while (left := _zombie_children() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    names = []
    own_session = os.getsid(0)
    for pid in sorted(left):
        try:
            if os.getsid(pid) == own_session:
                # Not from a run (agents and all they start have sessions of their own): a
                # git of the app's whose own child outlived it, say. Reaped, not failed.
                continue
            names.append(f"{pid} {psutil.Process(pid).name()} (zombie)")
        except (OSError, psutil.Error):
            names.append(f"{pid} (zombie)")
    _reap(left)
    return names


@pytest.fixture(autouse=True)
def no_leaked_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fail any test that leaves an agent process (or any child of the test process) alive, or
    a child of the test process unreaped (a zombie)."""
    prefix = str(tmp_path_factory.getbasetemp())
    before = {p.pid for p in marked_processes(prefix)} | {p.pid for p in _live_children()}
    zombies_before = _zombie_children()
    yield
    deadline = time.monotonic() + 3.0
    leaked: list[psutil.Process] = []
    while time.monotonic() < deadline:
        leaked = [p for p in marked_processes(prefix) + _live_children() if p.pid not in before]
        if not leaked:
            zombies = _left_zombies(zombies_before)
            if zombies:
                pytest.fail(f"test left {len(zombies)} zombie children (never reaped):\n  "
                            + "\n  ".join(zombies[:20]))
            return
        time.sleep(0.05)
    names = []
    for proc in leaked:
        try:
            names.append(f"{proc.pid} {' '.join(proc.cmdline())[:80]}")
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            continue
    pytest.fail("test left processes alive:\n  " + "\n  ".join(names))


@pytest.fixture(autouse=True)
def tolaria_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TOLARIA_HOME", str(home))
    return home


def _checkout_objects() -> str | None:
    """The object folder of the git repository holding this checkout (None: not a checkout)."""
    import subprocess

    try:
        done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute",
                               "--git-common-dir"], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    common = done.stdout.strip()
    return os.path.realpath(os.path.join(common, "objects")) if done.returncode == 0 else None


_CHECKOUT_OBJECTS = _checkout_objects()


@pytest.fixture(autouse=True)
def checkout_is_never_an_agent_folder(tolaria_home: Path) -> Iterator[None]:
    """A test (or the ``tolaria run`` it starts) that leaves the agent's folder at its default
    works in this checkout: every turn then snapshots the developer's tree. The checkpoint
    store it makes borrows the checkout's objects: fail the test that made one."""
    yield
    if _CHECKOUT_OBJECTS is None:
        return
    from tolaria.support import paths

    stores = paths.data_dir() / "checkpoints"
    for alternates in stores.glob("*.git/objects/info/alternates"):
        lines = alternates.read_text(errors="replace").splitlines()
        if any(os.path.realpath(line.strip()) == _CHECKOUT_OBJECTS for line in lines if line):
            pytest.fail("the test ran an agent in this checkout (it was checkpointed): give it "
                        "a folder of its own (cwd=tmp_path)")


#: The process backends (tolaria/core/process/backend.py); both run on Linux.
BACKENDS = ("linux", "portable")


@pytest.fixture(params=BACKENDS)
def process_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
                    ) -> Iterator[str]:
    """Each test that uses this runs once per backend: forced by TOLARIA_PROCESS_BACKEND for
    this process (the in-process registry) and every process it spawns (``tolaria run``).

    With ``portable`` this process stops being a child subreaper for the test (an earlier
    test's linux registry made it one), so nothing of the subreaper helps the portable backend.
    """
    from tolaria.core.process import linux_backend

    name = str(request.param)
    monkeypatch.setenv("TOLARIA_PROCESS_BACKEND", name)
    was = linux_backend.LinuxBackend().subreaper_active()
    if name == "portable" and was:
        linux_backend.set_subreaper(False)
    yield name
    if name == "portable" and was:
        linux_backend.set_subreaper(True)


@pytest.fixture
def fake_agent_argv() -> list[str]:
    return [sys.executable, str(FAKE_AGENT)]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A database path in the test's own folder (not yet created)."""
    return tmp_path / "store" / "tolaria.sqlite3"


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    """A Store opened on ``db``, closed after the test."""
    from tolaria.core.store.db import Store

    with closing(Store(db)) as opened:
        yield opened
