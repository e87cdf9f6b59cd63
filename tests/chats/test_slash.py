"""Claude's own slash commands read from its command folders (tolaria/chats/slash.py)."""

from __future__ import annotations

from pathlib import Path

from tolaria.chats.slash import claude_commands, describe


def test_project_commands_hide_user_ones_and_folders_namespace(tmp_path: Path) -> None:
    project, home = tmp_path / "proj", tmp_path / "home"
    (project / ".claude" / "commands" / "git").mkdir(parents=True)
    (home / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "review.md").write_text(
        '---\nallowed-tools: Bash\ndescription: "Review the diff"\n---\nbody\n')
    (project / ".claude" / "commands" / "git" / "sync.md").write_text("\n# Pull and rebase\n")
    (home / ".claude" / "commands" / "review.md").write_text("the user's own\n")
    (home / ".claude" / "commands" / "notes.md").write_text("")
    (home / ".claude" / "commands" / "not a command.txt").write_text("x")
    found = {c.name: (c.description, c.source)
             for c in claude_commands(str(project), str(home))}
    assert found == {"review": ("Review the diff", "project"),
                     "git:sync": ("Pull and rebase", "project"),
                     "notes": ("", "user")}


def test_no_folders(tmp_path: Path) -> None:
    assert claude_commands(str(tmp_path), str(tmp_path)) == []
    assert claude_commands(None, "") == []


def test_a_long_first_line_is_cut() -> None:
    assert describe("x" * 500).endswith("…") and len(describe("x" * 500)) == 120
