"""Helpers for core tests: manifests for the fake agents and an event collector."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tolaria.cli.printer import JsonPrinter
from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.events import Done, Event, Init, TextDelta
from tolaria.core.process import treefind
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.runtimes import make_runtime
from tolaria.core.runtimes.base import Outcome
from tolaria.core.store.db import Store
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

FAKE_AGENT = Path(__file__).resolve().parent / "fakes" / "fake_agent.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]


def parse_fixture(cli: str, name: str, protocol: str,
                  stream_id: str) -> tuple[list[Event], Outcome | None]:
    """Feed ``fixtures/<cli>/<name>`` line by line through the ``protocol`` runtime."""
    rt = make_runtime(protocol, stream_id, cli)
    events: list[Event] = []
    for line in (FIXTURES / cli / name).read_text().splitlines():
        events.extend(rt.feed(line))
    events.extend(rt.finish())
    assert all(e.stream_id == stream_id for e in events)
    return events, rt.outcome()


def text_of(events: list[Event]) -> str:
    """The answer text of an event log (its text deltas, joined)."""
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def assert_history_valid(messages: list[dict[str, Any]]) -> None:
    """Every tool call id of an assistant message is answered by a tool message before the next
    non-tool message, and no tool message answers an unknown id."""
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, message
            pending.discard(message["tool_call_id"])
            continue
        assert not pending, f"unanswered tool calls {pending} before {message}"
        if message["role"] == "assistant":
            pending = {c["id"] for c in message.get("tool_calls", [])}
    assert not pending


def fake_manifest(mode: str, protocol: str = "claude-stream-json", polite: str = "none",
                  env: dict[str, str] | None = None, window_ms: int = 300) -> Manifest:
    return Manifest(
        id=f"fake-{mode.replace('_', '-')}",
        name=f"Fake agent ({mode})",
        protocol=protocol,
        command=(sys.executable, str(FAKE_AGENT), mode, "{prompt}"),
        env=env or {},
        stop=StopPolicy(polite=polite, polite_window_ms=window_ms),
    )


@dataclass
class Collector:
    events: list[Event] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def done(self) -> Done:
        last = self.events[-1]
        assert isinstance(last, Done), f"last event is {last.kind}, not done"
        return last

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]


# --- async tests on plain asyncio, and process checks (used by tests/core) --------------------


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for ``python -m tolaria`` of this checkout run by a test: ours without the
    markers of a run (the child must not pass for an agent process of some run), this checkout
    first on PYTHONPATH, TOLARIA_HOME=home, the demo agent fast; ``extra`` has the last word."""
    markers = (treefind.ENV_MARKER, treefind.OWNER_MARKER, treefind.APP_CHILD_MARKER)
    env = {k: v for k, v in os.environ.items() if k not in markers}
    env.update(TOLARIA_HOME=str(home), TOLARIA_DEMO_DELAY="0", TOLARIA_DEMO_TOOL_SECONDS="0.1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    env.update(extra)
    return env


def async_test(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an ``async def`` test on a fresh plain asyncio loop (no pytest-asyncio needed).

    Fixtures still work: pytest reads the wrapped signature through ``__wrapped__``.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


async def wait_until(predicate: Callable[[], object], within: float = 10.0,
                     what: str = "condition") -> None:
    """Poll ``predicate`` on the running loop until it is truthy; fail after ``within`` s."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within} s waiting for {what}")
        await asyncio.sleep(0.01)


def portable_backend() -> bool:
    """Whether the portable process backend is forced (conftest's ``process_backend``)."""
    return os.environ.get("TOLARIA_PROCESS_BACKEND") == "portable"


def marker_pids(stream_id: str) -> list[int]:
    """Live (non-zombie) pids whose environment holds exactly ``TOLARIA_STREAM_ID=stream_id``.

    Scans /proc/*/environ directly, independently of tolaria.core.process.proctree.
    """
    needle = f"TOLARIA_STREAM_ID={stream_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
            if needle not in env:
                continue
            with open(f"/proc/{entry}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(int(entry))
    return found


def tool_sleeping(stream_id: str) -> bool:
    """Whether a ``sleep`` (the fake agents' tool) of the run ``stream_id`` runs now."""
    for pid in marker_pids(stream_id):
        try:
            if psutil.Process(pid).name() == "sleep":
                return True
        except psutil.Error:
            continue
    return False


def is_gone(proc: psutil.Process) -> bool:
    """A process counts as gone once it has exited (a zombie has exited)."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def pid_gone(pid: int) -> bool:
    """``is_gone`` for a bare pid (when the process could not be bound while it lived)."""
    try:
        return is_gone(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return True


def read_pidfile(path: Path | str, timeout: float = 10.0) -> list[psutil.Process]:
    """Block until the fake agent's FAKE_PIDFILE exists; bind each pid to its process at once."""
    deadline = time.monotonic() + timeout
    path = Path(path)
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"pidfile {path} not written within {timeout} s")
        time.sleep(0.01)
    procs = []
    for line in path.read_text().split():
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(int(line)))
    return procs


async def wait_pidfile(path: Path | str, within: float = 10.0) -> list[psutil.Process]:
    """``read_pidfile`` without blocking the loop."""
    path = Path(path)
    await wait_until(path.exists, within, f"pidfile {path}")
    return read_pidfile(path, timeout=0)


def assert_run_gone(stream_id: str, procs: Sequence[psutil.Process] = ()) -> None:
    """Every given process has exited and no process of the run (by marker) is alive: *now*."""
    alive = [p.pid for p in procs if not is_gone(p)]
    assert not alive, f"processes of {stream_id} still alive: {alive}"
    marked = marker_pids(stream_id)
    assert not marked, f"processes with TOLARIA_STREAM_ID={stream_id} still alive: {marked}"


def assert_done_once_last(collector: Collector) -> Done:
    kinds = collector.kinds()
    assert kinds.count("done") == 1, kinds[-20:]
    return collector.done


@dataclass
class LiveRun:
    """A run of ``stream_ai_agent`` started as a task on the running loop."""

    stream_id: str
    registry: ProcessRegistry
    collector: Collector
    task: asyncio.Task[Done]

    def abort(self) -> bool:
        return self.registry.abort(self.stream_id)

    def state(self) -> str | None:
        for info in self.registry.live():
            if info["stream_id"] == self.stream_id:
                return str(info["state"])
        return None

    async def finish(self, within: float = 15.0) -> Done:
        """Await ``done``; then check it is the one terminal event, and last."""
        done = await asyncio.wait_for(asyncio.shield(self.task), within)
        assert self.collector.events
        assert self.collector.events[-1] is done
        assert_done_once_last(self.collector)
        return done

    async def wait_for_kind(self, kind: str, within: float = 10.0) -> None:
        await wait_until(lambda: kind in self.collector.kinds(), within, f"a {kind} event")


def start_run(manifest: Manifest, prompt: str = "hi", *, cwd: str | Path | None = None,
              env: dict[str, str] | None = None, grace_s: float = 0.5,
              registry: ProcessRegistry | None = None, stream_id: str | None = None,
              collector: Collector | None = None) -> LiveRun:
    """Start a run as a task (call from inside a running loop)."""
    registry = registry if registry is not None else ProcessRegistry()
    stream_id = stream_id or new_stream_id()
    collector = collector if collector is not None else Collector()
    request = RunRequest(manifest, prompt, None if cwd is None else str(cwd), env or {})
    task = asyncio.ensure_future(
        stream_ai_agent(request, stream_id, collector, registry=registry, grace_s=grace_s))
    return LiveRun(stream_id, registry, collector, task)


def stored_turn(store: Store, chat_id: int, agent: str, prompt: str, answer: str, *,
                session: str | None = None, stop: str = "end_turn") -> int:
    """A finished turn written straight into a store (its id): an earlier turn of a chat, as a
    real run would have stored it (``session``: the agent's session id from its init)."""
    sid = new_stream_id()
    turn = store.start_turn(chat_id, sid, agent, prompt)
    if session is not None:
        store.append_event(Init(sid, agent=agent, session_id=session))
    store.append_event(TextDelta(sid, text=answer))
    store.append_event(Done(sid, stop_reason=stop))
    return turn.id


#: A paragraph of answer text (~0.9 KB) that ``fill_chat`` repeats to the size asked.
_FILLER = ("Restoring a long chat must cost the same as a short one: only the turns near the "
           "viewport become widgets, the rest stays in the store until the user scrolls there. "
           "This sentence is filler of a realistic shape, with `inline code`, **bold** words "
           "and a list below.\n\n- one point\n- another point\n\n")


def fill_chat(store: Store, conversation_id: int, turns: int, text_chars: int = 9000,
              agent: str = "demo") -> list[str]:
    """Write ``turns`` finished turns of ~``text_chars`` of answer text and one shell tool call
    each into a real store (through its public API); returns their stream ids, oldest first."""
    from tolaria.core.events import STOP_END_TURN, ToolDone, ToolStart

    stream_ids: list[str] = []
    body = (_FILLER * (text_chars // len(_FILLER) + 1))[:text_chars]
    for n in range(turns):
        sid = new_stream_id()
        store.start_turn(conversation_id, sid, agent, f"question number {n}: tell me more")
        store.append_event(TextDelta(sid, text=f"## Answer {n}\n\nLet me look.\n\n"))
        store.append_event(ToolStart(sid, tool_id=f"t{n}", name="Bash",
                                     input={"command": f"ls -la src/{n}"}))
        store.append_event(ToolDone(sid, tool_id=f"t{n}", output=f"total {n}\nfile.py\n"))
        store.append_event(TextDelta(sid, text=f"turn-{n}-marker " + body))
        store.append_event(Done(sid, stop_reason=STOP_END_TURN, duration_ms=1200 + n))
        stream_ids.append(sid)
    store.flush()
    return stream_ids


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` as its user would: a fixed identity, no inherited ``GIT_*``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="u", GIT_AUTHOR_EMAIL="u@x", GIT_COMMITTER_NAME="u",
               GIT_COMMITTER_EMAIL="u@x")
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env=env, check=True, timeout=30).stdout


def git_repo(root: Path, files: dict[str, str]) -> Path:
    """A new repository at ``root`` with ``files`` (relative path -> text) committed on main."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    return root


ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def python_child(script: str, *args: str, env: dict[str, str] | None = None,
                 cwd: Path = ROOT) -> Iterator[subprocess.Popen[str]]:
    """``python -c script args`` with text pipes and no stdin, the checkout importable (``env``
    defaults to ours); killed at the end if it is still alive (a failed assertion leaves no
    process behind)."""
    if env is None:
        pythonpath = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath)}
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=cwd)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def sigkill(proc: subprocess.Popen[str]) -> str:
    """SIGKILL ``proc`` at once (no shutdown, no flush interval) and reap it; what it printed
    that was not read yet."""
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    return rest


def chain_alive(log: Path | str) -> list[int]:
    """Live (non-zombie) generations of a hop chain (tests/fakes/hop_chain.py) writing ``log``:
    found by the log's path in their command line, whatever their pid or environment."""
    needle = os.fsencode(str(log))
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def chain_generations(log: Path | str) -> int:
    """How many generations a hop chain has written to ``log`` (its first process included)."""
    try:
        return len(Path(log).read_text().split())
    except OSError:
        return 0


def reap_adopted() -> int:
    """Reap the zombies that came back to the test process (a child subreaper once a registry
    made it one) from an app it started: what a killed or exited ``tolaria run`` left is
    re-parented here, and nobody else will ever reap it (tests/conftest.py fails a test that
    leaves zombie children). Returns how many were reaped."""
    from tolaria.core.process import freeze

    return freeze.reap_orphans(0)


def add_fake_agent(home: Path, mode: str, script: Path | None = None) -> str:
    """A user manifest in ``home`` running tests/fakes/fake_agent.py (or ``script``) in ``mode``
    (for ``tolaria run --agent``); returns its id."""
    import json

    agent = f"fake-{mode.replace('_', '-')}"
    folder = home / "adapters"
    folder.mkdir(exist_ok=True)
    (folder / f"{agent}.toml").write_text(
        f'id = "{agent}"\nname = "Fake {mode}"\nprotocol = "claude-stream-json"\n'
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(script or FAKE_AGENT))}, "
        f'"{mode}", "{{prompt}}"]\n')
    return agent


def watchdogs_of(pid: int) -> list[psutil.Process]:
    """The watchdog (tolaria.core.process.watchdog) that process ``pid`` started."""
    found = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children():
            try:
                with open(f"/proc/{child.pid}/environ", "rb") as fh:
                    if b"TOLARIA_WATCHDOG=1" in fh.read().split(b"\0"):
                        found.append(child)
            except OSError:
                continue
    return found


def reap_after_watchdog(dogs: Sequence[psutil.Process], within: float = 5.0) -> None:
    """Wait until the killed app's watchdog has done its work and exited, then reap what came
    back to us (``reap_adopted``)."""
    deadline = time.monotonic() + within
    while any(not is_gone(d) for d in dogs) and time.monotonic() < deadline:
        time.sleep(0.01)
    reap_adopted()


def settle_orphans(within: float = 5.0) -> None:
    """After an app this test started has exited: wait until the watchdogs that came back to
    us (not our own) have exited too, then reap what came back (``reap_adopted``)."""
    from tolaria.core.process import watchdog

    ours = watchdog.watchdog_pid()
    dogs = [d for d in watchdogs_of(os.getpid()) if d.pid != ours]
    reap_after_watchdog(dogs, within)


class RecordingPrinter(JsonPrinter):
    """``tolaria run --json``'s printer, keeping each event it printed as well."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.seen.append(event)
        super().__call__(event)
