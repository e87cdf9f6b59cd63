"""``tolaria run`` against hostile files and agent output (issue 14): a NUL byte that comes back
in the next turn's argv, a full disk, a read-only home, a socket folder of another user. Each
runs the real CLI in a child process; see docs/RELIABILITY.md "Hostile cases (issue 14)"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: An agent that prints a NUL inside its answer, and echoes the prompt it got (its last argv).
NUL_AGENT = """
id = "nul-agent"
name = "NUL printer"
protocol = "lines"
command = ["{python}", "-c", "import os, sys; print('before\\\\x00after'); print('env: ' + os.environ['NULVAR']); print('got: ' + sys.argv[-1])", "{prompt}"]
env = { NULVAR = "in\\u0000env" }
"""


def cli(home: Path, *args: str, timeout: float = 60,
        **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    full.update(TOLARIA_HOME=str(home), PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "tolaria", *args], env=full, cwd=home,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL)


def test_a_nul_in_agent_output_does_not_break_the_next_chat_turn(tolaria_home: Path) -> None:
    """Before: the second turn died with ``ValueError: embedded null byte`` (the history, NUL
    included, goes into the agent's argv)."""
    (tolaria_home / "adapters").mkdir()
    (tolaria_home / "adapters" / "nul-agent.toml").write_text(NUL_AGENT)
    first = cli(tolaria_home, "run", "--agent", "nul-agent", "first question")
    assert first.returncode == 0, first.stderr
    assert "before\0after" in first.stdout  # what the agent printed, shown as it came
    assert "env: in\ufffdenv" in first.stdout  # a NUL in a manifest's env value, too
    chats = json.loads(cli(tolaria_home, "chats", "--json").stdout)
    assert len(chats) == 1

    second = cli(tolaria_home, "run", "--chat", str(chats[0]["id"]), "second question")
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr and "null byte" not in second.stderr
    got = second.stdout.split("got: ", 1)[1]
    assert "before\ufffdafter" in got  # the history reached the agent, the NUL replaced
    assert "second question" in got
    assert "\0" not in got
