"""A real `pip install` of the wheel ships adapters/ and resources/ and runs the demo agent."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_wheel_ships_data_and_runs_from_a_fresh_venv(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        check=True, timeout=500, cwd=tmp_path,
    )
    (wheel,) = wheels.glob("tolaria-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for top in ("adapters", "resources"):
        shipped = {n for n in names if n.startswith(f"tolaria/_data/{top}/")}
        in_repo = {f"tolaria/_data/{top}/{p.relative_to(ROOT / top)}"
                   for p in (ROOT / top).rglob("*") if p.is_file()}
        assert in_repo and in_repo <= shipped, f"{top}/ missing from the wheel"
    assert "tolaria/demo_agent.py" in names
    # The remote supervisor is brought to hosts from the installed package as a bundle of its
    # files, checked by its hash: the wheel must ship the very bytes (ADR 0026).
    package = ROOT / "tolaria/core/remote/supervisor"
    for path in package.glob("*.py"):
        data = zipfile.ZipFile(wheel).read(f"tolaria/core/remote/supervisor/{path.name}")
        assert data == path.read_bytes()

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                   check=True, timeout=300)
    # Runtime dependencies come from this environment (no download); the package itself only
    # from the wheel. A .pth line adds a path without processing the .pth files inside it, so an
    # editable install of the checkout does not leak in.
    site = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps_dir = Path(psutil.__file__).resolve().parent.parent
    Path(site, "tolaria_test_deps.pth").write_text(f"{deps_dir}\n")

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {**os.environ, "TOLARIA_DEMO_TOOL_SECONDS": "0.1", "TOLARIA_DEMO_DELAY": "0"}
    where = subprocess.run([str(py), "-c", "import tolaria; print(tolaria.__file__)"],
                           capture_output=True, text=True, cwd=outside, env=env, check=True)
    assert where.stdout.startswith(str(venv)), where.stdout
    # The supervisor's bundle is built from the installed files alone: the same bytes, the
    # same hash the bootstrap checks, as here.
    from tolaria.core.remote import bootstrap

    installed = subprocess.run(
        [str(py), "-c", "from tolaria.core.remote import bootstrap; "
                        "print(bootstrap.supervisor_hash())"],
        capture_output=True, text=True, cwd=outside, env=env, check=True)
    assert installed.stdout.strip() == bootstrap.supervisor_hash()
    run = subprocess.run([str(venv / "bin" / "tolaria"), "run", "--agent", "demo", "hello"],
                         capture_output=True, text=True, cwd=outside, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "```python" in run.stdout
    agents = subprocess.run([str(venv / "bin" / "tolaria"), "agents", "--json"],
                            capture_output=True, text=True, cwd=outside, env=env, timeout=60)
    assert '"demo"' in agents.stdout and "tolaria-demo-agent" in agents.stdout
    # The installed command is scripts/tolaria, not pip's wrapper: its ``import re`` would be
    # milliseconds of ``tolaria abort``, a stop from another terminal (docs/PERFORMANCE.md).
    script = venv / "bin" / "tolaria"
    assert script.read_text().splitlines()[0] == f"#!{py}"
    abort = subprocess.run([str(py), "-X", "importtime", str(script), "abort",
                            "ai-agent-stream-0000"], capture_output=True, text=True,
                           cwd=outside, env={**env, "TOLARIA_HOME": str(tmp_path / "home")},
                           timeout=60)
    assert (abort.returncode, abort.stdout) == (1, "false\n"), abort.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in abort.stderr.splitlines()
                if line.startswith("import time:")}
    assert "tolaria.cli.main" in imported
    assert "re" not in imported and "json" not in imported
