"""The soak of bench/soak.py, short: start/stop cycles over the fake-agent zoo in this process.

``TOLARIA_SOAK_CYCLES`` (default 100) sets the length; the 1,000-cycle figures are in
docs/RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_soak", ROOT / "bench" / "soak.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_soak_leaves_no_process_fd_thread_or_memory_behind() -> None:
    soak = _bench()
    cycles = int(os.environ.get("TOLARIA_SOAK_CYCLES", "100"))
    report = asyncio.run(soak.soak(cycles, seed=int(os.environ.get("TOLARIA_SOAK_SEED", "1"))))
    summary = report.as_dict()
    assert report.failures == [], summary
    assert report.survivors == 0, summary
    assert report.fds[1] <= report.fds[0], summary
    assert report.threads[1] <= report.threads[0], summary
    assert report.rss_growth_mb <= soak.RSS_LIMIT_MB, summary
    assert set(summary["by_moment"]) == set(soak.MOMENTS), summary
