"""The agent's environment names the folder it runs in (PWD), whatever folder Tolaria runs in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers import async_test, start_run

from tolaria.core.adapters.manifest import Manifest

#: Not a shell: a shell would correct a wrong PWD itself, an agent (node, python) does not.
_PRINT_PWD = "import os; print(os.environ['PWD'] + '|' + os.getcwd())"


@async_test
async def test_pwd_is_the_runs_folder_not_tolarias(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("PWD", "/")  # a stale PWD, as inherited from the shell that started us
    manifest = Manifest(id="pwd-echo", name="pwd", protocol="lines",
                        command=(sys.executable, "-c", _PRINT_PWD, "{prompt}"))
    run = start_run(manifest, "x", cwd=work)
    done = await run.task
    assert done.stop_reason == "end_turn"
    pwd, real = run.collector.text().strip().split("|")
    assert pwd == str(work) == os.path.realpath(real)
