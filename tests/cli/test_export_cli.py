"""``tolaria export`` as a real subprocess, on a chat a real ``tolaria run`` (the demo agent)
stored; and ``tolaria desktop install|uninstall`` in a throwaway home."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli.test_cli import tolaria
from helpers import cli_env
from nonroot import tolaria_as_other_user, world_reachable_folder


@pytest.fixture
def chat_home(tmp_path: Path, work: Path) -> tuple[dict[str, str], Path]:
    """A home whose chat 1 holds one turn of the demo agent, run for real."""
    env = cli_env(tmp_path / "home")
    ran = tolaria("run", "--agent", "demo", "list the files", env=env, cwd=work)
    assert ran.returncode == 0, ran.stderr
    return env, work


def test_export_to_stdout_in_each_format(chat_home: tuple[dict[str, str], Path]) -> None:
    env, work = chat_home
    as_json = tolaria("export", "1", "--format", "json", env=env, cwd=work)
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["chat"]["origin"] == "command-line"
    [turn] = doc["turns"]
    assert (turn["prompt"], turn["status"], turn["agent"]) == ("list the files", "completed",
                                                               "demo")
    assert any(item["type"] == "tool" for item in turn["items"])
    markdown = tolaria("export", "1", "--format", "md", env=env, cwd=work)
    assert markdown.returncode == 0 and "## Turn 1" in markdown.stdout
    page = tolaria("export", "1", env=env, cwd=work)  # html by default
    assert page.returncode == 0 and page.stdout.startswith("<!DOCTYPE html>")
    assert page.stdout.rstrip().endswith("</html>")


def test_export_to_a_file_replaces_it_whole(chat_home: tuple[dict[str, str], Path]) -> None:
    env, work = chat_home
    target = work / "chat.json"
    target.write_text("older")
    done = tolaria("export", "1", "-o", str(target), env=env, cwd=work)  # format: .json
    assert done.returncode == 0, done.stderr
    assert f"written to {target}" in done.stderr and done.stdout == ""
    assert json.loads(target.read_text())["turns"][0]["number"] == 1
    assert sorted(p.name for p in work.iterdir()) == ["chat.json"]


def test_bad_input_is_one_line_and_exit_2(chat_home: tuple[dict[str, str], Path]) -> None:
    env, work = chat_home
    (work / "keep.md").write_text("mine")
    for args, words in ((["export", "7"], "no chat 7; 'tolaria chats' lists them"),
                        (["export", "1", "-o", str(work)], "is a folder"),
                        (["export", "1", "-o", str(work / "no" / "x.md")], "does not exist"),
                        (["export", "7", "-o", str(work / "keep.md")], "no chat 7")):
        result = tolaria(*args, env=env, cwd=work)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and words in result.stderr
    assert (work / "keep.md").read_text() == "mine"
    assert sorted(p.name for p in work.iterdir()) == ["keep.md"]


def test_an_unwritable_folder_as_a_non_root_user(tmp_path: Path) -> None:
    with world_reachable_folder(owner_is_other_user=True) as home:
        ran = tolaria_as_other_user(home, "run", "--agent", "demo", "hello",
                                    TOLARIA_DEMO_DELAY="0", TOLARIA_DEMO_TOOL_SECONDS="0.1")
        assert ran.returncode == 0, ran.stderr
        locked = home / "locked"
        locked.mkdir()  # root's (when root): the test user cannot write there
        os.chmod(locked, 0o555)
        result = tolaria_as_other_user(home, "export", "1", "-o", str(locked / "c.html"))
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("tolaria: cannot write in") and \
            result.stderr.count("\n") == 1
        assert list(locked.iterdir()) == []


# -- desktop ------------------------------------------------------------------------------------

def _desktop(action: str, home: Path, tmp_path: Path, **extra: str
             ) -> subprocess.CompletedProcess[str]:
    env = cli_env(tmp_path / "tolaria-home", HOME=str(home), **extra)
    if "XDG_DATA_HOME" not in extra:
        env.pop("XDG_DATA_HOME", None)
    return tolaria("desktop", action, env=env, cwd=tmp_path)


def test_desktop_install_is_valid_idempotent_and_uninstall_removes_it(tmp_path: Path) -> None:
    home = tmp_path / "user"
    home.mkdir()
    first = _desktop("install", home, tmp_path)
    assert first.returncode == 0, first.stderr
    data = home / ".local" / "share"
    entry = data / "applications" / "tolaria.desktop"
    svg = data / "icons" / "hicolor" / "scalable" / "apps" / "tolaria.svg"
    png = data / "icons" / "hicolor" / "256x256" / "apps" / "tolaria.png"
    assert entry.is_file() and svg.is_file() and png.is_file()
    assert png.read_bytes().startswith(b"\x89PNG")
    text = entry.read_text()
    assert "Icon=tolaria\n" in text and "StartupWMClass=tolaria\n" in text
    exec_line = next(line for line in text.splitlines() if line.startswith("Exec="))
    program = exec_line.removeprefix("Exec=").split(" ")[0].strip('"')
    assert os.path.isabs(program) and os.access(program, os.X_OK)
    validate = shutil.which("desktop-file-validate")
    if validate is None:
        pytest.skip("NOT VALIDATED: desktop-file-validate (desktop-file-utils) is not installed")
    checked = subprocess.run([validate, str(entry)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and not checked.stdout.strip(), checked.stdout
    again = _desktop("install", home, tmp_path)
    assert again.returncode == 0 and "installed" not in again.stdout
    assert again.stdout.count("unchanged") == len(first.stdout.splitlines())
    gone = _desktop("uninstall", home, tmp_path)
    assert gone.returncode == 0, gone.stderr
    assert not entry.exists() and not svg.exists() and not png.exists()
    assert (data / "applications").is_dir()  # folders the user may share stay


def test_desktop_honours_xdg_data_home_and_leaves_a_users_own_entry(tmp_path: Path) -> None:
    home, data = tmp_path / "user", tmp_path / "xdg"
    home.mkdir()
    own = data / "applications" / "tolaria.desktop"
    own.parent.mkdir(parents=True)
    own.write_text("[Desktop Entry]\nType=Application\nName=My Tolaria\nExec=my-tolaria\n")
    done = _desktop("uninstall", home, tmp_path, XDG_DATA_HOME=str(data))
    assert done.returncode == 0 and "left (not written by Tolaria)" in done.stdout
    assert own.read_text().startswith("[Desktop Entry]")
    installed = _desktop("install", home, tmp_path, XDG_DATA_HOME=str(data))
    assert installed.returncode == 0
    assert "X-Tolaria-Installed=true" in own.read_text()  # install replaces it: it was asked
    assert not (home / ".local").exists()


def test_desktop_install_where_it_cannot_write_as_a_non_root_user() -> None:
    with world_reachable_folder() as home:  # root's folder: the test user cannot write in it
        result = tolaria_as_other_user(home, "desktop", "install",
                                       XDG_DATA_HOME=str(home / "share"))
        if os.getuid() != 0:
            pytest.skip("NOT TESTED: needs root to make a folder another user cannot write")
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith("tolaria: cannot write") and \
            result.stderr.count("\n") == 1
        assert not (home / "share").exists()
