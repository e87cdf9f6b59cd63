"""``tolaria run --host H --keep-running`` (ADR 0032): the choice is kept with the chat, the run
goes through the supervisor's keep mode (here through a command target that runs it on this
machine) and leaves no socket behind once it is over; without a host the flag is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import cli_env

from tolaria.core.store.db import Store


def _tolaria(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tolaria", "run", *args], env=cli_env(home),
                          cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_keep_running_needs_a_host(tolaria_home: Path, work: Path) -> None:
    done = _tolaria(tolaria_home, work, "--keep-running", "--agent", "demo", "hello")
    assert done.returncode == 2, done
    assert "--keep-running needs --host" in done.stderr


def test_keep_running_is_kept_with_the_chat(tolaria_home: Path, work: Path,
                                            tmp_path: Path) -> None:
    (tolaria_home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\nkeep_seconds = 60\nkeep_buffer_mb = 2\n')
    first = _tolaria(tolaria_home, work, "--host", "box", "--keep-running", "--agent", "demo",
                     "hello")
    assert first.returncode == 0, first.stderr
    store = Store()
    try:
        [chat] = store.list_conversations()
        assert chat.keep_running is True and chat.host == "box"
    finally:
        store.close()
    again = _tolaria(tolaria_home, work, "--chat", str(chat.id), "and again")
    assert again.returncode == 0, again.stderr
    store = Store()
    try:
        continued = store.get_conversation(chat.id)
        assert continued is not None and continued.keep_running is True
        assert [t.status for t in store.turns(chat.id)] == ["completed", "completed"]
    finally:
        store.close()
    assert list((tmp_path / "cache" / "runs").iterdir()) == [], "a socket was left"
    assert oct((tmp_path / "cache" / "runs").stat().st_mode & 0o777) == "0o700"


def test_a_bad_keep_setting_is_named(tolaria_home: Path, work: Path) -> None:
    (tolaria_home / "settings.toml").write_text('[remote]\nkeep_buffer_mb = 0\n')
    done = _tolaria(tolaria_home, work, "--host", "box", "--keep-running", "--agent", "demo",
                    "hello")
    assert done.returncode == 2, done
    assert "keep_buffer_mb: must be a number from 1 to 1024" in done.stderr
