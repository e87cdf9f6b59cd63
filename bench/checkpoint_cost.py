"""What checkpoints cost per turn, next to the same folder without ``.git`` (issue 21 item 4).

    python bench/checkpoint_cost.py [--big-mb 300] [--small-files 50000] [--tracked 100000]
                                    [--turns 3] [--old-rev eeaf47b] [--json]
                                    [--cases tracked,big-file,...]

Each case is a real repository built in a temporary folder (one commit of a few files):

- ``big-file``: one untracked ``--big-mb`` MB file (random bytes, not ignored);
- ``node_modules``: ``--small-files`` untracked small files in ``node_modules/`` (no .gitignore);
- ``plain-folder``: the same number of untracked small files in ``assets/`` (no heavy name: the
  count/bytes budget is what keeps it cheap);
- ``tracked``: ``--tracked`` committed files, with an *ignored* ``node_modules/`` of 10,000 files.

A "turn" is what the window and ``tolaria run`` do around an agent: ``TurnCheckpoints.take_before``,
the agent's edit (one tracked file changed, one new file), ``record_after`` (real SQLite store,
real git, a private ``TOLARIA_HOME``). The baseline is the same turn in the same folder with its
``.git`` moved aside (Tolaria then finds no repository and only notes it), measured in the same run,
alternating. Overhead = turn time with git minus without; growth = bytes added to Tolaria's
checkpoint store plus to the repository's own ``.git`` by that turn. For ``tracked`` the
implementation of ``--old-rev`` (the refs-in-the-repository one, ``git show REV:...``) is timed too.
Goals: overhead <= 1 s and growth <= 10 MB per turn for the untracked cases; ``tracked`` no slower
than the old implementation (0.4-0.6 s per turn).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MB = 1024 * 1024


def git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@x")
    # No auto-gc: a background `git gc` of the 100,000-file commit would write into the
    # `.git` this bench moves aside for the baseline turns.
    return subprocess.run(["git", "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-C",
                           str(repo), *args], capture_output=True, text=True, env=env,
                          check=True).stdout


def du(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def new_repo(root: Path, tracked: int = 3, ignore: str = "") -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "edit.txt").write_text("start\n")
    if ignore:
        (root / ".gitignore").write_text(ignore)
    for n in range(tracked):
        sub = root / "src" / f"d{n // 1000}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{n}.py").write_text(f"x = {n}\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    return root


def small_files(folder: Path, count: int) -> None:
    for n in range(count):
        sub = folder / f"p{n // 500}"
        if n % 500 == 0:
            sub.mkdir(parents=True, exist_ok=True)
        (sub / f"m{n}.js").write_text(f"module.exports = {n};\n")


CASES = ("big-file", "node_modules", "plain-folder", "tracked")


def build_cases(base: Path, args: argparse.Namespace, wanted: list[str]) -> dict[str, Path]:
    cases: dict[str, Path] = {}
    if "big-file" in wanted:
        repo = new_repo(base / "big-file")
        chunk = os.urandom(MB)
        with (repo / "dataset.bin").open("wb") as out:
            for n in range(args.big_mb):
                out.write(chunk if n % 2 else chunk[::-1])
        cases["big-file"] = repo
    if "node_modules" in wanted:
        repo = new_repo(base / "node_modules")
        small_files(repo / "node_modules", args.small_files)
        cases["node_modules"] = repo
    if "plain-folder" in wanted:
        repo = new_repo(base / "plain-folder")
        small_files(repo / "assets", args.small_files)
        cases["plain-folder"] = repo
    if "tracked" in wanted:
        repo = new_repo(base / "tracked", tracked=args.tracked, ignore="node_modules/\n")
        small_files(repo / "node_modules", 10_000)
        cases["tracked"] = repo
    return cases


def turn(service: object, store: object, chat: object, repo: Path, n: int) -> float:
    """One turn's checkpoint work (the agent's edit excluded); its wall time."""
    from tolaria.chats.checkpoints import TurnCheckpoints
    from tolaria.core.store.db import Conversation, Store

    assert isinstance(service, TurnCheckpoints) and isinstance(store, Store)
    assert isinstance(chat, Conversation)
    turn_id = store.start_turn(chat.id, f"ai-agent-stream-{os.getpid():08x}{n:024x}", "bench",
                               "edit").id
    started = time.perf_counter()
    service.take_before(chat, turn_id, str(repo))
    spent = time.perf_counter() - started
    (repo / "edit.txt").write_text(f"turn {n}\n")
    (repo / f"new{n}.txt").write_text("new\n")
    started = time.perf_counter()
    service.record_after(chat, turn_id)
    spent += time.perf_counter() - started
    return spent


def old_module(rev: str) -> types.ModuleType | None:
    try:
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:tolaria/core/checkpoints.py"],
                                capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError:
        return None
    module = types.ModuleType("old_checkpoints")
    sys.modules["old_checkpoints"] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:tolaria/core/checkpoints.py", "exec"), module.__dict__)
    return module


def old_turns(module: types.ModuleType, repo: Path, turns: int) -> list[float]:
    times = []
    for n in range(turns):
        started = time.perf_counter()
        before = module.snapshot(repo, module.ref_name("1", str(n), "before"))
        (repo / "edit.txt").write_text(f"old turn {n}\n")
        after = module.snapshot(repo, module.ref_name("1", str(n), "after"))
        module.changes(before, after)
        times.append(time.perf_counter() - started)
    module.delete(repo, "refs/tolaria/1/")
    return times


def measure(name: str, repo: Path, turns: int, old: types.ModuleType | None,
            say: Callable[[str], None]) -> dict[str, object]:
    from tolaria.chats.checkpoints import TurnCheckpoints
    from tolaria.core import checkpoints as ck
    from tolaria.core.store.db import Store

    with closing(Store(Path(os.environ["TOLARIA_HOME"]) / "data" / f"{name}.sqlite3")) as store:
        service = TurnCheckpoints(store)
        chat = store.create_conversation(name, "bench", str(repo))
        plain = store.create_conversation(name + "-plain", "bench", str(repo))
        store_dir = ck.store_of(repo)
        with_git, without, growth, notes = [], [], [], []
        for n in range(turns):
            size = (du(store_dir) if store_dir.exists() else 0) + du(repo / ".git")
            with_git.append(turn(service, store, chat, repo, 2 * n))
            growth.append(du(store_dir) + du(repo / ".git") - size)
            os.rename(repo / ".git", repo.parent / f"{name}.git-aside")
            try:
                without.append(turn(service, store, plain, repo, 2 * n + 1))
            finally:
                os.rename(repo.parent / f"{name}.git-aside", repo / ".git")
        for change in service.changes(chat.id):
            if change.notice:
                notes.append(change.notice)
    overhead = [a - b for a, b in zip(with_git, without, strict=True)]
    old_s = old_turns(old, repo, turns) if old is not None and name == "tracked" else []
    note = notes[-1] if notes else ""
    say(f"{name}: turn {_list(with_git)} s, without .git {_list(without)} s, overhead "
        f"{_list(overhead)} s; growth {_list([g / MB for g in growth])} MB; note: {note!r}"
        + (f"; old implementation {_list(old_s)} s" if old_s else ""))
    return {"case": name, "turn_s": with_git, "baseline_s": without, "overhead_s": overhead,
            "growth_bytes": growth, "note": note, "old_turn_s": old_s}


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.3f}" for v in values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--big-mb", type=int, default=300)
    parser.add_argument("--small-files", type=int, default=50_000)
    parser.add_argument("--tracked", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--old-rev", default="eeaf47b")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cases", default=",".join(CASES),
                        help="comma-separated cases to run (default: all): " + ", ".join(CASES))
    args = parser.parse_args()
    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(wanted) - set(CASES))
    if unknown or not wanted:
        print(f"unknown case(s): {', '.join(unknown) or '(none given)'}; known: "
              f"{', '.join(CASES)}", file=sys.stderr)
        return 2
    if shutil.which("git") is None:
        print("git is not installed", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="tolaria-ckbench-"))
    os.environ["TOLARIA_HOME"] = str(base / "home")
    say: Callable[[str], None] = (lambda _t: None) if args.json else print
    try:
        say(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; building cases in {base}")
        started = time.perf_counter()
        cases = build_cases(base, args, wanted)
        say(f"built in {time.perf_counter() - started:.0f} s")
        old = old_module(args.old_rev)
        results = [measure(name, repo, args.turns, old, say) for name, repo in cases.items()]
        say(f"load average after {os.getloadavg()[0]:.2f}")
        if args.json:
            print(json.dumps({"load": os.getloadavg(), "results": results}, indent=1))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
