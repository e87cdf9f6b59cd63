"""tolaria/support/desktop.py in a throwaway data home: the Exec line of an unusual launcher
path, the refusal on macOS and Windows, and what uninstall leaves."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tolaria.support import desktop


def test_an_exec_path_with_spaces_and_quotes_is_quoted(tmp_path: Path) -> None:
    argv = [str(tmp_path / 'my apps' / 'py"thon 100%'), "-m", "tolaria"]
    outcome = desktop.install(tmp_path / "share", argv=argv)
    entry = tmp_path / "share" / "applications" / "tolaria.desktop"
    assert outcome.changed[0] == entry
    exec_line = next(line for line in entry.read_text().splitlines()
                     if line.startswith("Exec="))
    assert exec_line == f'Exec="{tmp_path}/my apps/py\\"thon 100%%" -m tolaria'
    validate = shutil.which("desktop-file-validate")
    if validate is None:
        pytest.skip("NOT VALIDATED: desktop-file-validate (desktop-file-utils) is not installed")
    checked = subprocess.run([validate, str(entry)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and not checked.stdout.strip(), checked.stdout


def test_uninstall_leaves_a_changed_icon_and_other_files(tmp_path: Path) -> None:
    home = tmp_path / "share"
    desktop.install(home)
    files = desktop.targets(home)
    files[1].write_text("<svg>the user's own icon</svg>")
    other = home / "applications" / "other.desktop"
    other.write_text("[Desktop Entry]\n")
    outcome = desktop.uninstall(home)
    assert files[1] in outcome.unchanged and files[1].exists()
    assert not files[0].exists() and other.exists()
    assert desktop.uninstall(home).changed == []


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_not_on_macos_or_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 platform: str) -> None:
    monkeypatch.setattr(sys, "platform", platform)
    with pytest.raises(desktop.DesktopError, match="for Linux and the BSDs"):
        desktop.install(tmp_path / "share")
    with pytest.raises(desktop.DesktopError, match="for Linux and the BSDs"):
        desktop.uninstall(tmp_path / "share")
    assert not (tmp_path / "share").exists()


def test_a_relative_xdg_data_home_is_ignored(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", "relative/share")
    assert desktop.data_home() == tmp_path / ".local" / "share"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert desktop.data_home() == tmp_path / "xdg"
