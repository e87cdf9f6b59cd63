"""Gemini CLI's private home (ADR 0019, core/mcp/private_home.py): the user's settings plus
Tolaria's servers in a file of Tolaria's, every other entry of the user's ~/.gemini linked (so
credentials and sessions are the user's own), what Gemini created moved back at the end, and
the user's files never written."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.mcp.forms import McpLaunch, launch, plan
from tolaria.core.mcp.private_home import strip_comments
from tolaria.core.mcp.servers import McpServer

MARKER = {"TOLARIA_STREAM_ID": "ai-agent-stream-" + "2" * 32, "TOLARIA_OWNER": "owner-2"}
SETTINGS = b'{\n  // the user\'s comment\n  "general": {"vimMode": true},\n  "mcpServers": {}\n}\n'


def user_home(tmp_path: Path) -> Path:
    home = tmp_path / "user"
    (home / ".gemini" / "tmp" / "proj" / "chats").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_bytes(SETTINGS)
    (home / ".gemini" / "oauth_creds.json").write_text('{"token": "old"}')
    (home / ".gemini" / "settings.json").chmod(0o644)
    return home


def render(tmp_path: Path, environ: dict[str, str], *servers: McpServer) -> McpLaunch:
    gemini = load_adapters().get("gemini")
    env = {"PATH": str(Path(sys.executable).parent), **environ}
    passed = plan(gemini, servers or (McpServer("probe", command=sys.executable),), env).passed
    return launch(gemini, passed, MARKER, mode="full", folder=tmp_path / "run.files", environ=env)


def test_the_private_home_has_the_users_settings_and_entries(tmp_path: Path) -> None:
    home = user_home(tmp_path)
    theirs = home / ".gemini"
    (theirs / "settings.json").write_text(json.dumps(
        {"general": {"vimMode": True}, "mcpServers": {"own": {"command": "their-own"}}}))
    before = (theirs / "settings.json").read_bytes()
    out = render(tmp_path, {"HOME": str(home)}, McpServer("probe", command=sys.executable),
                 McpServer("own", command=sys.executable))
    private = Path(out.env["GEMINI_CLI_HOME"])
    assert private.parent == tmp_path / "run.files" and set(out.env) == {"GEMINI_CLI_HOME"}
    mine = private / ".gemini"
    data = json.loads((mine / "settings.json").read_text())
    assert data["general"] == {"vimMode": True}
    assert data["mcpServers"]["own"] == {"command": "their-own"}  # theirs wins a name clash
    assert data["mcpServers"]["probe"]["env"]["TOLARIA_STREAM_ID"] == MARKER["TOLARIA_STREAM_ID"]
    assert data["mcpServers"]["probe"]["trust"] is True
    assert stat.S_IMODE((mine / "settings.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert (mine / "oauth_creds.json").resolve() == (theirs / "oauth_creds.json").resolve()
    assert (mine / "tmp" / "proj" / "chats").is_dir() and (mine / "tmp").is_symlink()
    assert (private / ".agents").is_symlink()
    out.close()
    assert not (tmp_path / "run.files").exists()
    assert (theirs / "settings.json").read_bytes() == before
    assert sorted(p.name for p in theirs.iterdir()) == ["oauth_creds.json", "settings.json", "tmp"]


def test_what_gemini_writes_lands_in_the_users_folder(tmp_path: Path) -> None:
    """In place through a link, a new file through a link to a missing name, a file replaced
    by renaming over its link and a new folder moved back at the end (merged into one made
    meanwhile, where the user's entry of a name wins); the settings copy is not written back."""
    home = user_home(tmp_path)
    theirs = home / ".gemini"
    out = render(tmp_path, {"HOME": str(home)})
    mine = Path(out.env["GEMINI_CLI_HOME"]) / ".gemini"
    (mine / "tmp" / "proj" / "chats" / "session-1.json").write_text("{}")
    (mine / "installation_id").write_text("id-1")  # a link to a missing file: created there
    fresh = mine / "oauth_creds.json.tmp"
    fresh.write_text('{"token": "new"}')
    os.replace(fresh, mine / "oauth_creds.json")  # an atomic write replaces the link
    (mine / "history" / "proj").mkdir(parents=True)
    (mine / "history" / "proj" / "h.txt").write_text("ls")
    (mine / "commands").mkdir()
    (mine / "commands" / "gemini-made.toml").write_text("x")
    (mine / "commands" / "same.toml").write_text("gemini's")
    (theirs / "commands").mkdir()  # ... while the user made their own (or another run did)
    (theirs / "commands" / "same.toml").write_text("the user's")
    (mine / "settings.json").write_text('{"changed": true}')
    out.close()
    assert (theirs / "tmp" / "proj" / "chats" / "session-1.json").read_text() == "{}"
    assert (theirs / "installation_id").read_text() == "id-1"
    assert json.loads((theirs / "oauth_creds.json").read_text()) == {"token": "new"}
    assert (theirs / "history" / "proj" / "h.txt").read_text() == "ls"
    assert (theirs / "commands" / "gemini-made.toml").read_text() == "x"
    assert (theirs / "commands" / "same.toml").read_text() == "the user's"
    assert (theirs / "settings.json").read_bytes() == SETTINGS
    assert not (tmp_path / "run.files").exists()


def test_a_home_the_user_set_for_gemini_is_the_one_linked(tmp_path: Path) -> None:
    home = user_home(tmp_path)
    out = render(tmp_path, {"HOME": str(tmp_path / "elsewhere"), "GEMINI_CLI_HOME": str(home)})
    private = Path(out.env["GEMINI_CLI_HOME"])
    assert private != home
    data = json.loads((private / ".gemini" / "settings.json").read_text())
    assert data["general"] == {"vimMode": True}  # read with comments, as Gemini reads it
    assert (private / ".gemini" / "tmp").resolve() == (home / ".gemini" / "tmp").resolve()
    out.close()


def test_a_user_without_a_gemini_folder_gets_one_only_for_what_gemini_wrote(
        tmp_path: Path) -> None:
    home = tmp_path / "new-user"
    home.mkdir()
    out = render(tmp_path, {"HOME": str(home)})
    mine = Path(out.env["GEMINI_CLI_HOME"]) / ".gemini"
    assert json.loads((mine / "settings.json").read_text())["mcpServers"]["probe"]
    out.close()
    assert not (home / ".gemini").exists()
    out = render(tmp_path, {"HOME": str(home)})
    mine = Path(out.env["GEMINI_CLI_HOME"]) / ".gemini"
    (mine / "tmp" / "p").mkdir(parents=True)
    out.close()
    assert (home / ".gemini" / "tmp" / "p").is_dir()
    assert not (home / ".gemini" / "settings.json").exists()


def test_comments_are_stripped_as_gemini_does_but_not_inside_strings() -> None:
    text = '{"a": "http://x//y /* no */", // c\n "b": /* c */ 2}'
    assert json.loads(strip_comments(text)) == {"a": "http://x//y /* no */", "b": 2}
    assert json.loads(strip_comments('{"q": "say \\"//\\"" /* end */}')) == {"q": 'say "//"'}


def test_broken_user_settings_are_linked_as_they_are(tmp_path: Path) -> None:
    """Gemini reports a broken settings file itself; Tolaria neither hides nor rewrites it."""
    home = user_home(tmp_path)
    (home / ".gemini" / "settings.json").write_text('{"general": ')
    out = render(tmp_path, {"HOME": str(home)})
    mine = Path(out.env["GEMINI_CLI_HOME"]) / ".gemini"
    assert (mine / "settings.json").is_symlink()
    assert (mine / "settings.json").read_text() == '{"general": '
    out.close()
    assert (home / ".gemini" / "settings.json").read_text() == '{"general": '


def test_without_symlinks_gemini_gets_the_settings_file_form(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows without the right to make symlinks: the system defaults file, as on a host."""
    home = user_home(tmp_path)

    def refused(self: Path, target: object, target_is_directory: bool = False) -> None:
        raise OSError(1314, "A required privilege is not held by the client")

    monkeypatch.setattr(Path, "symlink_to", refused)
    out = render(tmp_path, {"HOME": str(home)})
    assert set(out.env) == {"GEMINI_CLI_SYSTEM_DEFAULTS_PATH"}
    data = json.loads(Path(out.env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"]).read_text())
    assert "probe" in data["mcpServers"]
    assert [p.name for p in (tmp_path / "run.files").iterdir()] == ["settings.json"]
    out.close()
    assert not (tmp_path / "run.files").exists()
