"""The project rule: .ci/run runs exactly the test command the README gives, and that command
lints and type-checks (ruff, mypy --strict over tolaria/ and tests/, and for macOS and Windows)
before the tests run."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("python3 -m venv .venv && ")]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    (ci_command,) = _commands((ROOT / ".ci" / "run").read_text())
    assert ci_command in _commands((ROOT / "README.md").read_text())
    steps = ci_command.split(" && ")
    assert steps[2:4] == [".venv/bin/ruff check .", ".venv/bin/mypy"]
    assert steps[-1] == ".venv/bin/python -m pytest"
    # and type-checked as macOS and Windows see it (issue 24): tolaria and tests as darwin,
    # tolaria as win32 (the tests are POSIX-only: fork, setuid, AF_UNIX)
    assert steps[4] == ".venv/bin/mypy --platform darwin"
    assert steps[5].startswith(".venv/bin/mypy --platform win32 ") and steps[5].endswith(" tolaria")
    assert len(steps) == 7
