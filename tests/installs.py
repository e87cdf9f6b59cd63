"""Fake installs for discovery tests: a user's HOME with CLIs in the usual folders, fake shells.

Everything is real files under ``tmp_path``: executable scripts that print a version, symlinked
``bin`` entries, package.json files laid out as npm, nvm, bun or pnpm leave them.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from tolaria.core.programs import login_shell
from tolaria.core.programs.native import RULES, node_platform

#: Variables that point discovery at install folders; cleared so the machine's own do not leak in.
INSTALL_VARS = ("NPM_CONFIG_PREFIX", "npm_config_prefix", "NVM_BIN", "NVM_DIR", "PNPM_HOME",
                "BUN_INSTALL", "VOLTA_HOME", "HOMEBREW_PREFIX")
#: A name no real machine has in /usr/local/bin or /opt/homebrew/bin.
PROGRAM = "tolaria-fake-cli-3f9a"


@dataclass
class User:
    """A fake user account: HOME, an empty PATH folder, no login shell (until one is set)."""

    home: Path
    path_dir: Path
    monkeypatch: pytest.MonkeyPatch

    def set_shell(self, script: Path) -> None:
        self.monkeypatch.setenv("SHELL", str(script))


def fake_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> User:
    home = tmp_path / "userhome"
    home.mkdir()
    path_dir = tmp_path / "pathbin"
    path_dir.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(path_dir))
    # A shell that cannot start: fails at once, with a reason, unless a test sets a fake one.
    monkeypatch.setenv("SHELL", str(tmp_path / "no-such-shell"))
    for name in INSTALL_VARS:
        monkeypatch.delenv(name, raising=False)
    login_shell.clear_cache()
    return User(home, path_dir, monkeypatch)


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def version_script(folder: Path, name: str = PROGRAM, version: str = "1.2.3") -> Path:
    """An executable ``name`` in ``folder`` that prints ``<name> <version>`` on --version."""
    return executable(folder / name, f"#!/bin/sh\necho '{name} {version} from {folder}'\n")


def banner_shell(path: Path, login_path: str, log: Path | None = None) -> Path:
    """A login shell that prints banners around what it runs, with ``login_path`` as its PATH.

    Like a real one it takes ``-l``/``-i`` flags then ``-c COMMAND``; it logs each call (one
    line of arguments) to ``log`` so tests can count and inspect them.
    """
    logging = f'echo "$*" >> "{log}"\n' if log else ""
    return executable(path, f"""#!/bin/sh
{logging}echo "Last login: Tue Dec  1 09:00:00 on ttys001 (a banner with a : colon)"
while [ "$#" -gt 0 ] && [ "$1" != "-c" ]; do shift; done
PATH='{login_path}'
export PATH
/bin/sh -c "$2"
echo
echo "Have a nice day, PATH=/banner/after"
""")


def hanging_shell(path: Path, pidfile: Path) -> Path:
    """A login shell whose rc file never finishes (and leaves a child of its own running)."""
    # The fake user's PATH has neither: find them where the system keeps them.
    sleep, mv = (shutil.which(p, path="/usr/bin:/bin") for p in ("sleep", "mv"))
    return executable(path, f"""#!/bin/sh
echo "loading a very slow rc file"
{sleep} 60 &
echo "$$ $!" > "{pidfile}.tmp" && {mv} "{pidfile}.tmp" "{pidfile}"
wait
""")


def codex_package(root: Path, *, nested: bool, native: bool = True) -> tuple[Path, Path, Path]:
    """An ``@openai/codex`` install as npm leaves it under ``root`` (a prefix's node_modules).

    Returns (wrapper script, native binary, package folder). ``nested``: the platform package is
    inside the wrapper's own node_modules (``npm -g``); else next to it (a local install, as in
    the real cache). The wrapper prints ``wrapper``; the native binary prints its version and
    the variables the wrapper would have given it.
    """
    plat, arch = node_platform()
    rule = RULES["@openai/codex"]
    triple = rule.targets.get((plat, arch))
    if triple is None:
        pytest.skip(f"codex has no native build for {plat}-{arch}")
    package = root / "@openai" / "codex"
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "@openai/codex",
                                                      "bin": {"codex": "bin/codex.js"}}))
    wrapper = executable(package / "bin" / "codex.js", "#!/bin/sh\necho wrapper 0.171.0\n")
    platform_name = f"@openai/codex-{plat}-{arch}"
    platform_dir = (package / "node_modules" if nested else root) / platform_name
    (platform_dir / "vendor" / triple / "bin").mkdir(parents=True)
    (platform_dir / "package.json").write_text(json.dumps({"name": "@openai/codex"}))
    binary = platform_dir / "vendor" / triple / "bin" / "codex"
    if native:
        executable(binary, "#!/bin/sh\necho \"codex-cli 0.171.0 native "
                           "root=$CODEX_MANAGED_PACKAGE_ROOT npm=$CODEX_MANAGED_BY_NPM "
                           "bun=$CODEX_MANAGED_BY_BUN\"\n")
    return wrapper, binary, package


def link(entry: Path, target: Path) -> Path:
    """A ``bin`` entry symlinked (relatively, as npm does) to ``target``."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.symlink_to(os.path.relpath(target, entry.parent))
    return entry
