"""``tolaria abort`` / ``tolaria streams`` start fast (issue #16.1), and the CLI's polish (#16.3).

The start-up of ``tolaria abort ID`` is part of a cross-process stop's latency, so these tests
pin what it imports instead of timing it (a timing fails under load; an import of asyncio or of
the runner does not come and go). The figures are in docs/PERFORMANCE.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from cli.test_cli import EXIT_CANCELLED, demo_in_background, tolaria
from helpers import cli_env, is_gone

from tolaria.core.stream_id import new_stream_id

#: Modules the abort/streams path must not import (each costs milliseconds, some tens).
HEAVY = ("asyncio", "sqlite3", "psutil", "PySide6", "argparse", "typing", "concurrent", "socket",
         "selectors", "json", "re", "enum", "pathlib", "urllib", "ipaddress",
         "tolaria.core.turns", "tolaria.core.store", "tolaria.core.events", "tolaria.config",
         "tolaria.chats", "tolaria.support.crash", "tolaria.support.paths",
         "tolaria.core.process.registry", "tolaria.core.process.control",
         "tolaria.core.process.proctree", "tolaria.cli.terminal")
#: Everything ``tolaria abort`` / ``tolaria streams`` may import beyond what ``python -c pass``
#: does: the C modules of the socket client and these of Tolaria's, nothing else.
ALLOWED = frozenset({
    "__future__", "_json", "_socket", "select", "tolaria", "tolaria.cli", "tolaria.cli.main",
    "tolaria.cli.exits",
    "tolaria.cli.streams", "tolaria.core", "tolaria.core.process",
    "tolaria.core.process.claim", "tolaria.core.process.control_client",
    "tolaria.core.process.procread",
    # The process backend seam and the linux backend (the portable one imports psutil).
    "tolaria.core.process.backend", "tolaria.core.process.backend_base",
    "tolaria.core.process.linux_backend",
    "tolaria.core.process.procfs",
    "tolaria.core.stream_id", "tolaria.support",
    "tolaria.support.sockdir"})
#: What the ``tolaria`` console script runs, without its ``import re`` (pip's wrapper has it,
#: uv's has not) and without ``-m`` (runpy imports contextlib, importlib.util...).
LAUNCH = "import sys; from tolaria.cli.main import main; sys.exit(main())"


def importtime(code: str, args: list[str], home: Path, cwd: Path,
               ) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules ``python -X importtime -c CODE ARGS`` imported, and the result."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *args],
                            env=cli_env(home), cwd=cwd, capture_output=True, text=True,
                            timeout=60, check=False)
    names = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    return names, result


def imported_modules(args: list[str], home: Path, cwd: Path) -> tuple[set[str], str]:
    """The modules ``tolaria ARGS`` imported (``-X importtime``), and its stdout."""
    names, result = importtime(LAUNCH, args, home, cwd)
    assert "tolaria.cli.main" in names, result.stderr[-2000:]
    return names, result.stdout


def heavy_in(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))


def beyond_baseline(names: set[str], home: Path, cwd: Path) -> list[str]:
    """What ``names`` has beyond ``python -c pass`` and ALLOWED."""
    baseline, _ = importtime("pass", [], home, cwd)
    return sorted(names - baseline - ALLOWED)


def test_abort_and_streams_import_nothing_heavy(tolaria_home: Path, work: Path) -> None:
    for args in (["abort", new_stream_id()], ["streams"]):
        names, _ = imported_modules(args, tolaria_home, work)
        assert "tolaria.core.process.control_client" in names
        assert heavy_in(names) == [], args
        assert beyond_baseline(names, tolaria_home, work) == [], args
    names, _ = imported_modules(["streams", "--json"], tolaria_home, work)
    # For programs: json and the terminal module's regexes (with what re imports) are allowed.
    allowed = ("json", "re", "enum", "tolaria.cli.terminal")
    assert heavy_in({n for n in names if not n.startswith(allowed)}) == []


def test_abort_of_a_live_run_imports_nothing_heavy_and_stops_it(tolaria_home: Path,
                                                                 work: Path) -> None:
    with demo_in_background(tolaria_home, work) as (runner, sid, procs):
        listed, table = imported_modules(["streams"], tolaria_home, work)
        names, stdout = imported_modules(["abort", sid], tolaria_home, work)
        assert sid in table  # the table of a live run needs no regex either
        assert heavy_in(listed) == []
        assert beyond_baseline(listed, tolaria_home, work) == []
        assert stdout.strip() == "true"
        assert heavy_in(names) == []
        assert beyond_baseline(names, tolaria_home, work) == []
        assert [p.pid for p in procs if not is_gone(p)] == []  # answered once the tree is gone
        assert runner.finish() == EXIT_CANCELLED


def test_an_error_on_the_fast_path_still_writes_a_crash_report(tolaria_home: Path,
                                                               work: Path) -> None:
    code = ("import sys\n"
            "from tolaria.cli.main import _install_crash_hook_lazily\n"
            "_install_crash_hook_lazily()\n"
            "assert 'tolaria.support.crash' not in sys.modules\n"
            "raise RuntimeError('boom on the fast path')\n")
    result = subprocess.run([sys.executable, "-c", code], env=cli_env(tolaria_home), cwd=work,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert "RuntimeError: boom on the fast path" in result.stderr
    reports = list((tolaria_home / "data" / "crash-reports").glob("crash-*-cli-*.txt"))
    assert len(reports) == 1, result.stderr
    assert "boom on the fast path" in reports[0].read_text()


def test_streams_table_shows_agent_chat_elapsed_and_owner(tolaria_home: Path,
                                                          work: Path) -> None:
    with demo_in_background(tolaria_home, work) as (runner, sid, _procs):
        time.sleep(1.1)  # so the elapsed time is at least 1 s
        text = tolaria("streams", env=cli_env(tolaria_home), cwd=work)
        as_json = tolaria("streams", "--json", env=cli_env(tolaria_home), cwd=work)
        tolaria("abort", sid, env=cli_env(tolaria_home), cwd=work)
        assert runner.finish() == EXIT_CANCELLED
    header, *rows = text.stdout.splitlines()
    assert header.split() == ["STREAM", "ID", "AGENT", "CHAT", "ELAPSED", "OWNER", "PID"]
    (row,) = [r for r in rows if r.startswith(sid)]
    cells = row.split()
    assert cells[1] == "demo"
    assert cells[2] == "hello"  # the chat's title, from the prompt
    assert cells[3].endswith("s") and int(cells[3].rstrip("s")) >= 1
    assert cells[4] == str(runner.proc.pid)
    (entry,) = [s for s in json.loads(as_json.stdout) if s["stream_id"] == sid]
    assert entry["chat"] == "hello"
    assert entry["agent"] == "demo"
    assert entry["owner_pid"] == runner.proc.pid
    assert entry["elapsed_s"] >= 1.0


def test_help_is_clean(tolaria_home: Path, work: Path) -> None:
    top = tolaria("--help", env=cli_env(tolaria_home), cwd=work)
    run = tolaria("run", "--help", env=cli_env(tolaria_home), cwd=work)
    assert top.returncode == run.returncode == 0
    for text in (top.stdout, run.stdout):
        assert "``" not in text and "`" not in text
        assert "RUN_AGENT" not in text and "RUN_CWD" not in text
    assert "examples:" in top.stdout
    for command in ("run", "chats", "agents", "streams", "abort", "models", "key"):
        (line,) = [ln for ln in top.stdout.splitlines() if ln.strip().startswith(command + " ")]
        assert len(line.split()) > 2, f"{command} has no description"
    assert "--agent AGENT" in run.stdout
    assert "141" in run.stdout


def test_empty_prompt_is_bad_input_and_saves_nothing(tolaria_home: Path, work: Path) -> None:
    for prompt in ("", "   \n\t"):
        result = tolaria("run", "--agent", "demo", prompt, env=cli_env(tolaria_home), cwd=work)
        assert result.returncode == 2
        assert "the prompt is empty" in result.stderr
        assert result.stdout == ""
    chats = tolaria("chats", "--json", env=cli_env(tolaria_home), cwd=work)
    assert json.loads(chats.stdout) == []


def test_commands_that_read_the_store_do_not_load_the_checkpoint_machinery(
        tolaria_home: Path, work: Path) -> None:
    """Building ``tolaria``'s parser must not import what only changes/revert/rewind use (git
    checkpoints, restore plans: ~0.3 s of a ``tolaria usage`` or ``tolaria chats``)."""
    for args in (["usage", "--json"], ["chats"]):
        names, _ = imported_modules(args, tolaria_home, work)
        assert not {n for n in names if n in ("tolaria.cli.changes", "tolaria.chats.checkpoints",
                                              "tolaria.chats.restore", "tolaria.core.checkpoints")
                    }, args
