"""Capture each real CLI's own stored session files, for the importer's fixtures.

Runs two turns per CLI (a text turn, then a tool turn resuming the same session) through
Tolaria's built-in adapters against the loopback fake model, in a throwaway HOME, then copies the
files the CLI wrote there (its session store; not its config, caches or logs) into
``OUT/<agent>/`` with their paths relative to that HOME. The throwaway folder's path is replaced
by ``/home/user`` (HOME) and ``/home/user/work`` (the working folder) so fixtures are stable.

    PYTHONPATH=. python tests/e2e/capture_sessions.py tests/fixtures/sessions [AGENT ...]

With ``--image`` (into ``tests/fixtures/sessions_image``): one turn with an image attached (a
PNG from outside the working folder, as a user's Downloads), through Tolaria's own forms for
the CLI (ADR 0028), so the session holds the image the way that CLI stores one.

With ``--live`` (into ``tests/fixtures/sessions_live``): a session caught while the CLI writes it.
Three turns: a tool that ends by itself (``sleep 8``), a tool stopped by Tolaria's Stop
(``sleep 300``), a text turn; the files are copied into ``OUT/<agent>/mid`` the moment the first
tool's ``sleep`` runs (its turn not answered yet) and into ``OUT/<agent>/final`` at the end.

Needs the e2e tier's CLIs installed (run the e2e tests once, or they are installed here).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

import psutil  # noqa: E402
from e2e.clis import CLIS, install, run_env  # noqa: E402
from e2e.fake_model import FakeModelServer  # noqa: E402
from helpers import Collector, marker_pids  # noqa: E402

from tolaria.chats.attachments import AttachmentDesk  # noqa: E402
from tolaria.core.adapters.manifest import load_adapters  # noqa: E402
from tolaria.core.events import Init  # noqa: E402
from tolaria.core.process.registry import ProcessRegistry  # noqa: E402
from tolaria.core.stream_id import new_stream_id  # noqa: E402
from tolaria.core.turns.runner import RunRequest, stream_ai_agent  # noqa: E402

AGENTS = ["claude", "codex", "gemini", "qwen", "opencode"]
#: Where each CLI keeps its sessions, relative to HOME (what the importer reads).
SESSION_DIRS = {
    "claude": [".claude/projects"],
    "codex": [".codex/sessions"],
    "gemini": [".gemini/tmp"],
    "qwen": [".qwen/tmp", ".qwen/projects"],
    "opencode": [".local/share/opencode"],
}
PROMPTS = ["E2E-TEXT: say hello", "E2E-ECHO: run echo hi"]
#: ``--live``: (prompt, what to do once the tool's ``sleep`` runs: "snapshot" or "stop").
#: ``--image``: the prompt sent with the image.
IMAGE_PROMPT = "E2E-TEXT: what is in the attachment?"
LIVE = [("E2E-WAIT: run the waiting command", "snapshot"),
        ("E2E-SLEEP: run the slow command", "stop"), ("E2E-TEXT: say hello", None)]


async def capture(agent: str, server: FakeModelServer, out: Path, live: bool = False,
                  image: bool = False) -> None:
    install(CLIS[agent])
    manifest = load_adapters().get(agent)
    with tempfile.TemporaryDirectory(prefix="tolaria-capture-") as tmp:
        home = Path(tmp) / "home"
        work = Path(tmp) / "work"
        work.mkdir()
        env = run_env(CLIS[agent], home, server.url)
        env["PWD"] = str(work)  # opencode takes its folder from PWD, not from its cwd
        session: str | None = None
        script = LIVE if live else [(prompt, None) for prompt in PROMPTS]
        attached: tuple[Any, ...] = ()
        if image:
            script = [(IMAGE_PROMPT, None)]
            attached = _image(agent, Path(tmp), home, env)
        for prompt, action in script:
            events = Collector()
            registry = ProcessRegistry()
            stream_id = new_stream_id()
            request = RunRequest(manifest, prompt, str(work), env, session_id=session,
                                 permission_mode="full", attachments=attached)
            task = asyncio.ensure_future(
                stream_ai_agent(request, stream_id, events, registry=registry))
            if action is not None:
                await _until_sleeping(stream_id, task)
                if action == "snapshot":
                    _snapshot(agent, home, work, tmp, out / agent / "mid")
                else:
                    registry.abort(stream_id)
            done = await asyncio.wait_for(task, 120)
            inits = [e.session_id for e in events.events if isinstance(e, Init) and e.session_id]
            session = session or (inits[0] if inits else None)
            print(f"{agent}: {prompt!r} -> {done.stop_reason} (session {session})")
        target = out / agent / "final" if live else out / agent
        _snapshot(agent, home, work, tmp, target)
        print(f"{agent}: {sum(1 for p in target.rglob('*') if p.is_file())} files in {target}")


def _image(agent: str, tmp: Path, home: Path, env: dict[str, str]) -> tuple[Any, ...]:
    """A PNG in a Downloads folder, stored as Tolaria stores an attachment; the CLI told its
    model can see (Qwen decides by the model's name, opencode by its config)."""
    from attachfiles import write_png
    from e2e.test_real_attach import _vision_env

    downloads = tmp / "Downloads"
    downloads.mkdir()
    write_png(downloads / "screen shot.png", width=16, height=12)
    _vision_env(agent, env, home)
    os.environ["TOLARIA_HOME"] = str(tmp / "tolaria")  # the stored copy the run stages
    return (AttachmentDesk(None).attach(str(downloads / "screen shot.png")),)


async def _until_sleeping(stream_id: str, task: asyncio.Future[Any]) -> None:
    """Until the run's tool runs its ``sleep`` (found by the run's environment marker)."""
    for _ in range(1200):
        if task.done():
            raise RuntimeError("the turn ended before its tool ran")
        for pid in marker_pids(stream_id):
            try:
                if psutil.Process(pid).cmdline()[:1] == ["sleep"]:
                    return
            except psutil.Error:
                continue
        await asyncio.sleep(0.05)
    raise RuntimeError("the tool's sleep never ran")


def _snapshot(agent: str, home: Path, work: Path, tmp: str, target: Path) -> None:
    """Copy the CLI's session store under ``home`` into ``target``, throwaway paths replaced."""
    shutil.rmtree(target, ignore_errors=True)
    for rel in SESSION_DIRS[agent]:
        src = home / rel
        if not src.exists():
            continue
        if agent == "opencode":
            _copy_database(src / "opencode.db", target / rel / "opencode.db",
                           {str(work): "/home/user/work", str(home): "/home/user",
                            tmp: "/tmp/capture"})
            continue
        for path in sorted(p for p in src.rglob("*") if p.is_file()):
            rel_name = str(path.relative_to(home)).replace(
                str(work).replace("/", "-"), "-home-user-work")
            dest = target / rel_name
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                shutil.copyfile(path, dest)
                continue
            dest.write_text(text.replace(str(work), "/home/user/work")
                            .replace(str(home), "/home/user").replace(tmp, "/tmp/capture"))


def _copy_database(src: Path, dest: Path, paths: dict[str, str]) -> None:
    """One self-contained SQLite file (the WAL folded in), the throwaway paths replaced."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.unlink(missing_ok=True)
    source, copy = sqlite3.connect(src), sqlite3.connect(dest)
    try:
        source.backup(copy)
        for (table,) in copy.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            columns = [row[1] for row in copy.execute(f'PRAGMA table_info("{table}")')
                       if row[2].upper() == "TEXT"]
            for column in columns:
                for old, new in paths.items():
                    copy.execute(f'UPDATE "{table}" SET "{column}" = replace("{column}", ?, ?)',
                                 (old, new))
        copy.commit()
        copy.execute("PRAGMA journal_mode = DELETE")
        copy.execute("VACUUM")
    finally:
        source.close()
        copy.close()


async def main(out: Path, agents: list[str], live: bool, image: bool = False) -> None:
    server = FakeModelServer().start()
    try:
        for agent in agents:
            await capture(agent, server, out, live, image)
    finally:
        server.stop()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a not in ("--live", "--image")]
    asyncio.run(main(Path(args[0]), args[1:] or AGENTS, "--live" in sys.argv,
                     "--image" in sys.argv))
