"""``@path`` in ``tolaria run``'s prompt reaches the agent in its form, saved or not (issue 26
item 3: the same mapping as the window, chats/mentions/forms.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli_env

ECHO = '''id = "echo"
name = "Echo"
protocol = "lines"
command = ["{python}", "-c", "import sys; print(sys.argv[1])", "{prompt}"]
permissions = "safe"
[permission_args]
safe = []
full = []
'''


@pytest.mark.parametrize("save", [True, False])
def test_a_mention_goes_as_the_path_to_an_agent_without_at_syntax(
        tolaria_home: Path, save: bool) -> None:
    (tolaria_home / "adapters").mkdir(exist_ok=True)
    (tolaria_home / "adapters" / "echo.toml").write_text(ECHO)
    (tolaria_home / "src").mkdir()
    (tolaria_home / "src" / "app.py").write_text("x")
    args = [sys.executable, "-m", "tolaria", "run", "--agent", "echo",
            *([] if save else ["--no-save"]), "explain @src/app.py to a@b.com"]
    done = subprocess.run(args, env=cli_env(tolaria_home), cwd=tolaria_home,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "explain src/app.py to a@b.com" in done.stdout
    assert "@src/app.py" not in done.stdout
