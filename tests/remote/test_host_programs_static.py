"""What Tolaria runs on a host's own Python (every module of the supervisor's bundle, the agent
probe, the git runner): standard library only and Python >= 3.8, checked for each the same way.
These need no sshd."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tolaria.core.remote import agent_probe, bundle, hostgit


def source(module: ModuleType) -> Path:
    assert module.__file__ is not None
    return Path(module.__file__)


ON_THE_HOST = [*bundle.package_files(), source(agent_probe), source(hostgit)]


def _id(path: Path) -> str:
    return f"supervisor/{path.stem}" if path.parent.name == "supervisor" else path.stem


def test_the_checks_cover_every_file_of_the_bundle() -> None:
    assert {f"{bundle.NAME}/{path.name}" for path in ON_THE_HOST} >= set(bundle.sources())
    assert len(bundle.sources()) >= 8


@pytest.mark.parametrize("path", ON_THE_HOST, ids=_id)
def test_it_imports_the_standard_library_only(path: Path) -> None:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names


@pytest.mark.parametrize("path", ON_THE_HOST, ids=_id)
def test_it_needs_no_python_newer_than_3_8(path: Path) -> None:
    vermin = shutil.which("vermin") or str(Path(sys.executable).parent / "vermin")
    if not Path(vermin).exists():
        pytest.fail("vermin is missing: pip install -e '.[test]'")
    done = subprocess.run([vermin, "-t=3.8-", "--violations", "--no-tips", "--no-parse-comments",
                           str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", ON_THE_HOST, ids=_id)
def test_ruff_checks_it_for_python_3_8(path: Path) -> None:
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    targets = config["tool"]["ruff"]["per-file-target-version"]
    relative = path.resolve().relative_to(root).as_posix()
    assert [v for k, v in targets.items() if fnmatch.fnmatch(relative, k)] == ["py38"], relative
