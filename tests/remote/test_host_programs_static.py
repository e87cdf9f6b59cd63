"""What Tolaria runs on a host's own Python (the supervisor, the agent probe, the git runner):
standard library only and Python >= 3.8, checked for each the same way. These need no sshd."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tolaria.core.remote import agent_probe, hostgit, supervisor

ON_THE_HOST = [supervisor, agent_probe, hostgit]


def source(module: ModuleType) -> Path:
    assert module.__file__ is not None
    return Path(module.__file__)


@pytest.mark.parametrize("module", ON_THE_HOST, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_it_imports_the_standard_library_only(module: ModuleType) -> None:
    names = set()
    for node in ast.walk(ast.parse(source(module).read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names


@pytest.mark.parametrize("module", ON_THE_HOST, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_it_needs_no_python_newer_than_3_8(module: ModuleType) -> None:
    vermin = shutil.which("vermin") or str(Path(sys.executable).parent / "vermin")
    if not Path(vermin).exists():
        pytest.fail("vermin is missing: pip install -e '.[test]'")
    done = subprocess.run([vermin, "-t=3.8-", "--violations", "--no-tips", "--no-parse-comments",
                           str(source(module))], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
