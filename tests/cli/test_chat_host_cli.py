"""``tolaria run --host`` keeps the host with the chat, and ``--chat ID`` continues there (issue
25, item 1), through a command target that runs the supervisor here: a prefix script that notes
each connection, then execs the supervisor's argv (no sshd needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import cli_env

from tolaria.core.remote import bootstrap
from tolaria.core.store.db import Store


def _tolaria(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tolaria", "run", *args], env=cli_env(home),
                          cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def runs(log: Path) -> list[str]:
    """The connections that started the supervisor (an agent's run)."""
    return [line for line in log.read_text().splitlines()
            if line == f"connected {bootstrap.supervisor_hash()}"]


def test_a_chat_started_on_a_host_continues_there(tolaria_home: Path, work: Path,
                                                  tmp_path: Path) -> None:
    log = tmp_path / "connections.log"
    prefix = tmp_path / "onbox.sh"
    # Each connection notes the program it brings ($4: its hash): the supervisor runs the
    # agent; Tolaria's git runner (the folder's checkpoint, ADR 0035) connects on its own.
    prefix.write_text(f'#!/bin/sh\necho "connected $4" >> "{log}"\nexec "$@"\n')
    prefix.chmod(0o755)
    (tolaria_home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "{prefix}"\npython = "{sys.executable}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\n')
    folder = tmp_path / "there"
    folder.mkdir()
    first = _tolaria(tolaria_home, work, "--host", "box", "--agent", "demo", "--cwd", str(folder),
                     "hello")
    assert first.returncode == 0, first.stderr
    assert len(runs(log)) == 1
    store = Store()
    try:
        [chat] = store.list_conversations()
        assert (chat.host, chat.cwd) == ("box", str(folder))
    finally:
        store.close()

    again = _tolaria(tolaria_home, work, "--chat", str(chat.id), "and again")
    assert again.returncode == 0, again.stderr
    assert len(runs(log)) == 2, "the follow-up ran on the chat's host"
    store = Store()
    try:
        continued = store.get_conversation(chat.id)
        assert continued is not None and (continued.host, continued.cwd) == ("box", str(folder))
        assert [t.status for t in store.turns(chat.id)] == ["completed", "completed"]
    finally:
        store.close()
