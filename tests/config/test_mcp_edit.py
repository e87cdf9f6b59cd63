"""Writing [mcp.servers.<name>] and [mcp] on_failure: the file says exactly what was saved,
keeps comments and hand edits, and is never half-written or written over when broken."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tolaria.config.mcp import REFUSE, McpSettings, load_mcp
from tolaria.config.mcp_edit import (
    remove_server,
    save_server,
    server_problems,
    set_on_failure,
)
from tolaria.core.mcp.servers import HTTP, McpConfigError, McpServer
from tolaria.support.tomlfile import SettingsFileError

HAND_WRITTEN = """\
# my settings, written by hand
[behaviour]
grace_seconds = 3.0

[mcp.servers.git]
# the git tools, for every agent
command = "uvx"
args = ["mcp-server-git"]
"""

GIT = McpServer("git", command="uvx", args=("mcp-server-git",))


def test_add_edit_rename_remove_keep_the_hand_written_comments(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(HAND_WRITTEN)
    docs = McpServer("docs", HTTP, url="https://docs.example/mcp",
                     headers=(("Authorization", "Bearer ${DOCS_TOKEN}"),), agents=("claude",))
    save_server(docs, path=path)
    edited = McpServer("git", command="uvx", args=("mcp-server-git", "--repo", "."),
                       env=(("GIT_TOKEN", "${MY_TOKEN}"),), enabled=False)
    save_server(edited, replace="git", path=path)
    text = path.read_text()
    assert "# my settings, written by hand" in text
    assert "# the git tools, for every agent" in text
    assert 'env = {GIT_TOKEN = "${MY_TOKEN}"}' in text or 'env = { GIT_TOKEN' in text
    settings = load_mcp(path)
    assert settings.problems == ()
    assert settings.servers == (edited, docs)

    renamed = McpServer("repo", command="uvx", args=("mcp-server-git",))
    save_server(renamed, replace="git", path=path)
    assert [s.name for s in load_mcp(path).servers] == ["docs", "repo"]
    assert "grace_seconds = 3.0" in path.read_text()

    assert remove_server("docs", path=path)
    assert not remove_server("docs", path=path)
    assert load_mcp(path).servers == (renamed,)
    assert path.read_text().startswith("# my settings, written by hand")
    set_on_failure(REFUSE, path=path)
    assert remove_server("repo", path=path)  # the last one: [mcp] keeps on_failure alone
    assert load_mcp(path) == McpSettings(on_failure=REFUSE)
    set_on_failure("continue", path=path)
    save_server(GIT, path=path)
    assert remove_server("git", path=path)
    assert "[mcp.servers" not in path.read_text()


def test_a_new_file_and_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    save_server(GIT, path=path)
    assert set_on_failure(REFUSE, path=path)
    assert not set_on_failure(REFUSE, path=path)
    settings = load_mcp(path)
    assert settings.on_failure == REFUSE
    assert settings.servers == (GIT,)
    assert oct(path.stat().st_mode & 0o777) == "0o600"  # it may hold tokens
    with pytest.raises(McpConfigError, match="on_failure"):
        set_on_failure("sometimes", path=path)


def test_a_taken_name_and_bad_values_are_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(HAND_WRITTEN)
    before = path.read_bytes()
    with pytest.raises(McpConfigError, match="name: a server named 'git' already exists"):
        save_server(GIT, path=path)
    other = McpServer("other", command="x")
    save_server(other, path=path)
    with pytest.raises(McpConfigError, match="already exists"):
        save_server(McpServer("git", command="y"), replace="other", path=path)
    path.write_bytes(before)
    for bad, field in ((McpServer("has space", command="x"), "name"),
                       (McpServer("s", command=""), "command"),
                       (McpServer("s", HTTP, url="ftp://x"), "url"),
                       (McpServer("s", command="x", env=(("1BAD", "v"),)), "env"),
                       (McpServer("s", command="x", env=(("A", "v"), ("A", "w"))), "env"),
                       (McpServer("s", HTTP, url="http://h", headers=(("Bad Name", "v"),)),
                        "headers"),
                       (McpServer("s", command="x", env=(("A", "two\nlines"),)), "env")):
        assert [f for f, _ in server_problems(bad)] == [field], bad
        with pytest.raises(McpConfigError, match=f"^{field}: "):
            save_server(bad, path=path)
        assert path.read_bytes() == before


def test_a_broken_file_is_never_written_over(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    broken = HAND_WRITTEN + "\n[mcp.servers.oops\ncommand = 1\n"
    path.write_text(broken)
    for write in (lambda: save_server(McpServer("new", command="x"), path=path),
                  lambda: remove_server("git", path=path),
                  lambda: set_on_failure(REFUSE, path=path)):
        with pytest.raises(SettingsFileError, match=r"settings.toml:10: not valid TOML"):
            write()
        assert path.read_text() == broken
    assert not list(tmp_path.glob(".settings.toml-*"))  # no temp file left


def test_mcp_that_is_not_a_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('mcp = "nope"\n')
    with pytest.raises(SettingsFileError, match="mcp must be a table"):
        save_server(GIT, path=path)
    assert path.read_text() == 'mcp = "nope"\n'


def test_only_the_fields_changed_in_the_window_are_written(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    save_server(GIT, path=path)
    # By hand, while the window shows GIT: another argument.
    path.write_text(path.read_text().replace('args = ["mcp-server-git"]',
                                             'args = ["mcp-server-git", "--by-hand"]'))
    edited = McpServer("git", command="uvx", args=("mcp-server-git",), agents=("claude",))
    saved = save_server(edited, replace="git", base=GIT, path=path)
    assert saved.args == ("mcp-server-git", "--by-hand")
    assert saved.agents == ("claude",)
    assert load_mcp(path).servers == (saved,)
    # Without a base (or a table broken by hand), the form's whole value is written.
    path.write_text(path.read_text().replace('command = "uvx"', "command = 7"))
    assert save_server(edited, replace="git", base=GIT, path=path) == edited
    assert load_mcp(path).servers == (edited,)


def test_two_processes_saving_servers_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(HAND_WRITTEN)
    other = subprocess.Popen([sys.executable, "-c", (
        "import sys\n"
        "from pathlib import Path\n"
        "from tolaria.config.mcp_edit import save_server\n"
        "from tolaria.core.mcp.servers import McpServer\n"
        "for i in range(15):\n"
        "    save_server(McpServer(f'theirs-{i}', command='x'), path=Path(sys.argv[1]))\n"),
        str(path)])
    try:
        for i in range(15):
            save_server(McpServer(f"mine-{i}", command="y"), path=path)
    finally:
        assert other.wait(60) == 0
    names = {s.name for s in load_mcp(path).servers}
    assert names == {f"{who}-{i}" for who in ("mine", "theirs") for i in range(15)} | {"git"}
    assert path.read_text().startswith("# my settings, written by hand")
