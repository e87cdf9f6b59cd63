"""The agent probe runs on the host's own Python, like the supervisor: standard library only,
Python >= 3.8, and the loader that runs it is a constant. These checks need no sshd."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tolaria.core.remote import agent_probe, discover

SOURCE = Path(agent_probe.__file__)


def test_the_probe_imports_the_standard_library_only() -> None:
    names = set()
    for node in ast.walk(ast.parse(SOURCE.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names


def test_the_probe_needs_no_python_newer_than_3_8() -> None:
    vermin = shutil.which("vermin") or str(Path(sys.executable).parent / "vermin")
    if not Path(vermin).exists():
        pytest.fail("vermin is missing: pip install -e '.[test]'")
    done = subprocess.run([vermin, "-t=3.8-", "--violations", "--no-tips", "--no-parse-comments",
                           str(SOURCE)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_shipped_source_is_what_is_sent() -> None:
    assert discover.probe_source() == SOURCE.read_bytes()
    assert "{" not in discover.LOADER.replace("{}", ""), "a constant: nothing is formatted in"


def test_names_never_reach_the_shell_script() -> None:
    """A program name with shell syntax is an argument of the login shell, never its script."""
    hostile = "x; touch /tmp/tolaria-probe-pwned #"
    found = agent_probe.login_shell_paths([hostile], {"PATH": "/usr/bin:/bin",
                                                      "SHELL": "/bin/sh"}, 5.0)
    assert found == {}
    assert not Path("/tmp/tolaria-probe-pwned").exists()
