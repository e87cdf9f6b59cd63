"""The @-mention picker on a generated repository: per-keystroke latency (issue 26 item 3).

    python bench/mention_picker.py [--files 100000] [--json]

Makes a git repository of ``--files`` files in ``--files``/16 folders in a temporary folder (90 %
added to the index, 10 % untracked, plus an ignored ``node_modules`` of 20,000 files that must not be listed), then:

- ``list``: ``list_folder`` (``git ls-files -co --exclude-standard -z``) and ``MentionIndex``
  built from it: the one-off cost, paid on a worker thread when ``@`` is first typed;
- ``window_wait_while_indexing``: the longest a 10 ms timer loop on the main thread was late
  while the index was built on a worker (the GIL: the window must keep answering);
- ``keystroke``: each query below typed one character at a time, ``MentionIndex.search`` timed
  per keystroke (p50, p99, max over all keystrokes, wall and the thread's CPU time; the
  window's budget is 50 ms);
- ``naive``: the same keystrokes scored by a plain Python loop over every path (an in-order
  letter test per path), the way a picker without the index would: the ratio is the index's
  gain. Results: docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tolaria.chats.mentions.listing import list_folder  # noqa: E402
from tolaria.chats.mentions.matcher import MentionIndex  # noqa: E402

QUERIES = ("composer", "src/ui/pick", "readme", "mtchr", "test_widget_42", "zq9x_nothing",
           "a", "lib/core/store.py")
WORDS = ("src", "lib", "core", "ui", "widgets", "store", "picker", "composer", "matcher", "util",
         "tests", "docs", "api", "server", "client", "render", "parse", "model", "view", "io",
         "net", "auth", "cache", "queue", "engine", "panel", "theme", "config", "cli", "app")
EXTS = (".py", ".ts", ".rs", ".go", ".md", ".json", ".tsx", ".c", ".h", ".toml")


def make_repo(folder: Path, count: int, seed: int = 26) -> None:
    """A tree of ~count/16 folders (up to 7 deep) holding ``count`` files."""
    rnd = random.Random(seed)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / ".gitignore").write_text("node_modules/\n")
    folders = [""]
    while len(folders) < max(1, count // 16):
        parent = rnd.choice(folders)
        if parent.count("/") >= 6:
            continue
        word = rnd.choice(WORDS) + (str(rnd.randint(0, 99)) if rnd.random() < 0.5 else "")
        folders.append(f"{parent}/{word}" if parent else word)
    folders = sorted(set(folders))
    for name in folders[1:]:
        (folder / name).mkdir(parents=True, exist_ok=True)
    names: set[str] = set()
    while len(names) < count:
        stem = "_".join(rnd.sample(WORDS, rnd.randint(1, 3))) + f"_{rnd.randint(0, 999)}"
        parent = rnd.choice(folders)
        names.add(f"{parent}/{stem}{rnd.choice(EXTS)}" if parent else stem + rnd.choice(EXTS))
    for name in names:
        os.close(os.open(folder / name, os.O_CREAT | os.O_WRONLY, 0o644))
    (folder / "node_modules").mkdir()
    for i in range(200):
        (folder / "node_modules" / f"pkg{i}").mkdir()
    for i in range(20_000):
        os.close(os.open(folder / "node_modules" / f"pkg{i % 200}" / f"f{i}.js",
                         os.O_CREAT | os.O_WRONLY, 0o644))
    # Everything added (node_modules is ignored), then a tenth taken out of the index again:
    # untracked, not ignored. (A 90,000-path pathspec would make ``git add`` quadratic.)
    subprocess.run(["git", "-C", str(folder), "add", "-A"], check=True)
    untracked = sorted(names)[count * 9 // 10:]
    subprocess.run(["git", "-C", str(folder), "update-index", "--force-remove", "--stdin"],
                   input="\n".join(untracked).encode(), check=True)


def naive(paths: list[str], query: str) -> list[str]:
    q = query.lower()
    out = []
    for path in paths:
        low = path.lower()
        at = 0
        for ch in q:
            at = low.find(ch, at) + 1
            if not at:
                break
        else:
            out.append(path)
    return sorted(out, key=len)[:50]


def worst_gap_while(work: object) -> float:
    """The longest the main thread waited to run (a 10 ms sleep loop, as the window's timers)
    while ``work`` ran on a worker thread: a single long C call there holds the GIL."""
    done = threading.Event()
    worker = threading.Thread(target=lambda: (work(), done.set()))  # type: ignore[operator]
    last, worst = time.monotonic(), 0.0
    worker.start()
    while not done.is_set():
        time.sleep(0.01)
        now = time.monotonic()
        worst, last = max(worst, now - last - 0.01), now
    worker.join()
    return worst


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        made = time.perf_counter()
        make_repo(repo, args.files)
        made = time.perf_counter() - made
        start = time.perf_counter()
        listing = list_folder(os.fspath(repo))
        listed = time.perf_counter() - start
        start = time.perf_counter()
        index = MentionIndex(listing.files, listing.folders)
        built = time.perf_counter() - start
        gap = worst_gap_while(lambda: MentionIndex(listing.files, listing.folders))
    assert not any(f.startswith("node_modules/") for f in listing.files), "ignored files listed"
    times: list[float] = []
    slow: list[float] = []
    cpu: list[float] = []
    paths = list(listing.files)
    for query in QUERIES:
        for end in range(1, len(query) + 1):
            typed = query[:end]
            t0, c0 = time.perf_counter(), time.thread_time()
            index.search(typed)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.thread_time() - c0) * 1000)
            t0 = time.perf_counter()
            naive(paths, typed)
            slow.append((time.perf_counter() - t0) * 1000)
    result = {
        "files": len(listing.files), "folders": len(listing.folders),
        "source": listing.source, "make_repo_s": round(made, 1),
        "list_ms": round(listed * 1000, 1), "index_ms": round(built * 1000, 1),
        "window_wait_while_indexing_ms": round(gap * 1000, 1),
        "keystrokes": len(times),
        "p50_ms": round(statistics.median(times), 2), "p99_ms": round(percentile(times, 99), 2),
        "max_ms": round(max(times), 2),
        "cpu_p50_ms": round(statistics.median(cpu), 2),
        "cpu_p99_ms": round(percentile(cpu, 99), 2),
        "load_average": round(os.getloadavg()[0], 1),
        "naive_p50_ms": round(statistics.median(slow), 2),
        "naive_p99_ms": round(percentile(slow, 99), 2),
        "ratio_p99_naive_over_index": round(percentile(slow, 99) / percentile(times, 99), 1),
    }
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:>28}: {value}")


if __name__ == "__main__":
    main()
