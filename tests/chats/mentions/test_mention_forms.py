"""``@path`` as each agent is sent it, in the window and in ``tolaria run`` alike."""

from __future__ import annotations

from pathlib import Path

from tolaria.chats.mentions.forms import find_mentions, render_mentions, spell
from tolaria.chats.run_config import prepare_run
from tolaria.core.adapters.manifest import load_adapters


def folder(tmp_path: Path) -> str:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x")
    (tmp_path / "my notes.md").write_text("x")
    return str(tmp_path)


def test_claude_gemini_qwen_keep_their_own_at_syntax(tmp_path: Path) -> None:
    cwd = folder(tmp_path)
    prompt = "look at @src/app.py and @src/, mail me at a@b.com or ask @someone."
    for protocol in ("claude-stream-json", "gemini-stream-json", "qwen-stream-json"):
        assert render_mentions(prompt, protocol, cwd) == prompt


def test_other_agents_get_the_path(tmp_path: Path) -> None:
    cwd = folder(tmp_path)
    prompt = "look at @src/app.py, and (@src/) then a@b.com @gone.py"
    assert render_mentions(prompt, "codex-exec-json", cwd) == (
        "look at src/app.py, and (src/) then a@b.com @gone.py")
    assert render_mentions(prompt, "acp", cwd).startswith("look at src/app.py,")


def test_a_path_with_a_space(tmp_path: Path) -> None:
    cwd = folder(tmp_path)
    typed = f"read {spell('my notes.md')} now"
    assert typed == 'read @"my notes.md" now'
    assert [m.path for m in find_mentions(typed, cwd)] == ["my notes.md"]
    assert render_mentions(typed, "gemini-stream-json", cwd) == r"read @my\ notes.md now"
    assert render_mentions(typed, "claude-stream-json", cwd) == 'read "my notes.md" now'
    assert render_mentions(typed, "opencode-json", cwd) == 'read "my notes.md" now'


def test_no_folder_no_change() -> None:
    assert render_mentions("@src/app.py", "codex-exec-json", None) == "@src/app.py"


def test_the_run_request_carries_the_agents_form(tmp_path: Path) -> None:
    """Both front ends build a turn's request through RunOptions.request."""
    cwd = folder(tmp_path)
    adapters = load_adapters()
    codex = prepare_run(adapters.get("codex"), path=tmp_path / "none.toml")
    assert codex.request("fix @src/app.py", cwd=cwd).prompt == "fix src/app.py"
    claude = prepare_run(adapters.get("claude"), path=tmp_path / "none.toml")
    assert claude.request("fix @src/app.py", cwd=cwd).prompt == "fix @src/app.py"
