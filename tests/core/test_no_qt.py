"""tolaria.core must stay importable and usable without Qt (the headless CLI depends on it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "tolaria" / "core"


def test_core_sources_do_not_mention_qt() -> None:
    offenders = []
    for path in CORE.rglob("*.py"):
        text = path.read_text()
        for needle in ("PySide6", "qasync", "PyQt"):
            if needle in text:
                offenders.append(f"{path.name}: {needle}")
    assert offenders == []


def test_importing_core_and_cli_loads_no_qt() -> None:
    code = (
        "import sys, pkgutil, importlib, tolaria.core, tolaria.cli.main\n"
        "for m in pkgutil.walk_packages(tolaria.core.__path__, 'tolaria.core.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = [m for m in sys.modules if m.startswith(('PySide6', 'qasync', 'shiboken'))]\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
