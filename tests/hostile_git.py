"""A repository that configures every command git could run for Tolaria: filters (clean, smudge,
process), textconv and diff commands, an external diff, hooks (in ``.git/hooks`` and through
``core.hooksPath``), fsmonitor, pagers, credential helpers, ``core.sshCommand``, an askpass, a
GPG program, in ``.git/config``, in an included config, in ``.gitattributes``, in
``.git/info/attributes`` and in a global config under ``HOME``. Each points at a marker command
that appends its name to a file: the file must stay absent."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

HOOKS = ("pre-commit", "post-commit", "post-checkout", "post-index-change", "reference-transaction",
         "pre-auto-gc", "post-rewrite", "fsmonitor-watchman", "pre-push", "post-merge")


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="u", GIT_AUTHOR_EMAIL="u@x", GIT_COMMITTER_NAME="u",
               GIT_COMMITTER_EMAIL="u@x", GIT_CONFIG_NOSYSTEM="1",
               GIT_CONFIG_GLOBAL="/dev/null")
    return env


def plain_git(repo: Path, *args: str) -> str:
    """git as a test sets the repository up: no config but the repository's (not yet hostile)."""
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env=clean_env(), check=True, timeout=30).stdout


def committed_repo(root: Path) -> Path:
    """A new repository at ``root`` (made by ``plain_git``) with ``a.txt`` committed on main."""
    root.mkdir()
    plain_git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("a\n")
    plain_git(root, "add", "-A")
    plain_git(root, "commit", "-qm", "first")
    return root


def marker_command(folder: Path) -> tuple[Path, str]:
    """(the marker file, a command that records that it ran and passes its input through)."""
    marker = folder / "RAN"
    script = folder / "marker.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> "{marker}"\ncat\n')
    script.chmod(0o755)
    return marker, str(script)


def make_hostile(repo: Path, home: Path) -> Path:
    """Turn the (committed) ``repo`` hostile and write a hostile ``home/.gitconfig``; returns the
    marker file that must never appear."""
    marker, cmd = marker_command(repo.parent)
    config = _evil_config(cmd)
    git_dir = repo / ".git"
    with (git_dir / "config").open("a") as out:
        out.write(config + f"[include]\n\tpath = {repo.parent / 'included.gitconfig'}\n")
    (repo.parent / "included.gitconfig").write_text(
        f"[filter \"inc\"]\n\tclean = {cmd} inc-clean\n\tsmudge = {cmd} inc-smudge\n")
    hooks = git_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    other_hooks = repo.parent / "hookdir"
    other_hooks.mkdir()
    for folder in (hooks, other_hooks):
        for name in HOOKS:
            (folder / name).write_text(f"#!/bin/sh\n{cmd} hook-{name} </dev/null\n")
            (folder / name).chmod(0o755)
    with (git_dir / "config").open("a") as out:
        out.write(f"[core]\n\thooksPath = {other_hooks}\n")
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "attributes").write_text("*.txt filter=inc diff=evil\n")
    (repo / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n")
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text(config.replace("evil", "global") + _evil_config(cmd))
    (home / ".config" / "git").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "git" / "attributes").write_text("* filter=global diff=global\n")
    return marker


def _evil_config(cmd: str) -> str:
    return (f"[filter \"evil\"]\n\tclean = {cmd} clean\n\tsmudge = {cmd} smudge\n"
            f"\tprocess = {cmd} process\n\trequired = true\n"
            f"[diff \"evil\"]\n\ttextconv = {cmd} textconv\n\tcommand = {cmd} diffcmd\n"
            f"[merge \"evil\"]\n\tdriver = {cmd} merge\n"
            f"[diff]\n\texternal = {cmd} external\n"
            f"[core]\n\tfsmonitor = {cmd}\n\tpager = {cmd} pager\n\tsshCommand = {cmd} ssh\n"
            f"\taskPass = {cmd} askpass\n\teditor = {cmd} editor\n"
            f"[pager]\n\tdiff = {cmd} pager-diff\n\tlog = {cmd} pager-log\n"
            f"[credential]\n\thelper = !{cmd} credential\n"
            f"[gpg]\n\tprogram = {cmd}\n[commit]\n\tgpgSign = true\n"
            f"[sequence]\n\teditor = {cmd} seq\n")
