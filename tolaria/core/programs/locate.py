"""Where is an agent's program? The run's PATH, the login shell's PATH, the usual install folders.

An app started from a launcher often has a bare PATH, so a CLI that works in the user's terminal
would be "not installed" for Tolaria. We search, in this order (first hit wins; a folder is
searched once, under its first source; the login shell is only asked when PATH has no hit):

1. ``PATH``: the run's own PATH.
2. ``login shell``: the PATH the user's login shell prints (:mod:`tolaria.core.programs.login_shell`).
3. ``npm global``: ``$NPM_CONFIG_PREFIX/bin``, ``prefix=`` in ``~/.npmrc`` + ``/bin``,
   ``~/.npm-global/bin``, ``/usr/local/bin``.
4. ``~/.local/bin``.
5. ``Homebrew``: ``$HOMEBREW_PREFIX/bin``, ``/opt/homebrew/bin``, (``/usr/local/bin``),
   ``/home/linuxbrew/.linuxbrew/bin``, ``~/.linuxbrew/bin``.
6. ``nvm``: ``$NVM_BIN``, then ``versions/node/*/bin`` under ``$NVM_DIR`` and ``~/.nvm``,
   newest Node version first.
7. ``bun``: ``$BUN_INSTALL/bin``, ``~/.bun/bin``.
8. ``pnpm``: ``$PNPM_HOME``, ``~/.local/share/pnpm``, ``~/Library/pnpm``.
9. ``volta``: ``$VOLTA_HOME/bin``, ``~/.volta/bin``.

A program found outside the run's PATH gets its folder prepended to the agent's PATH: an npm CLI
is ``#!/usr/bin/env node`` and, with nvm, ``node`` lives in that same folder. When the program
is a known npm wrapper script, the native binary behind it is run instead (:mod:`native`).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from tolaria.core.programs import login_shell
from tolaria.core.programs.native import find_native

SOURCE_GIVEN = "given path"
SOURCE_PATH = "PATH"
SOURCE_LOGIN_SHELL = "login shell"
SOURCE_NPM = "npm global"
SOURCE_LOCAL = "~/.local/bin"
SOURCE_HOMEBREW = "Homebrew"
SOURCE_NVM = "nvm"
SOURCE_BUN = "bun"
SOURCE_PNPM = "pnpm"
SOURCE_VOLTA = "volta"


class ProgramNotFound(Exception):
    """No runnable program by that name; the message says where we looked and what we saw."""


@dataclass(frozen=True)
class Location:
    """A program found, and what its process needs."""

    #: What to spawn: the native binary when a wrapper script was bypassed.
    program: str
    #: Where the command was found (as found: a ``bin`` symlink is not resolved).
    found_at: str
    #: Which search found it: one of the ``SOURCE_*`` names.
    source: str
    #: Folders to prepend to the agent's PATH (its own folder when outside the run's PATH).
    path_dirs: tuple[str, ...] = ()
    #: Variables to set (the native binary's, as its wrapper would have set them).
    set_env: tuple[tuple[str, str], ...] = ()
    #: Variables to remove before setting ``set_env``.
    unset_env: tuple[str, ...] = ()
    #: Whether ``program`` is the native binary behind the wrapper at ``found_at``.
    native: bool = False
    #: Arguments to put between ``program`` and the command's own (an interpreter's options
    #: and the script, when the wrapper relaunches a script: see native.NativeRule).
    args: tuple[str, ...] = ()

    def argv(self, rest: list[str]) -> list[str]:
        """The argv to spawn for a command whose arguments after the program are ``rest``."""
        return [self.program, *self.args, *rest]

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` as the program should get it."""
        out = dict(env)
        for name in self.unset_env:
            out.pop(name, None)
        out.update(self.set_env)
        if self.path_dirs:
            rest = [p for p in out.get("PATH", "").split(os.pathsep) if p]
            out["PATH"] = os.pathsep.join([*self.path_dirs, *rest])
        return out


def path_entries(value: str | None) -> list[str]:
    # Empty entries (the current folder, for a POSIX shell) are skipped on purpose: we never
    # want to run whatever lies in the agent's working folder.
    return [os.path.normpath(p) for p in (value or "").split(os.pathsep) if p]


def install_folders(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The usual install folders as (folder, source), in search order, each folder once."""
    home = env.get("HOME") or os.path.expanduser("~")

    def under_home(*parts: str) -> str:
        return os.path.join(home, *parts)

    def mac(folders: list[str]) -> list[str]:
        """Folders that exist only on macOS: not searched, nor listed, elsewhere."""
        return folders if sys.platform == "darwin" else []

    def var_dir(name: str, *parts: str) -> list[str]:
        value = env.get(name)
        return [os.path.join(value, *parts)] if value else []

    groups: list[tuple[str, list[str]]] = [
        (SOURCE_NPM, [*var_dir("NPM_CONFIG_PREFIX", "bin"), *var_dir("npm_config_prefix", "bin"),
                      *_npmrc_prefix_bin(env, home), under_home(".npm-global", "bin"),
                      "/usr/local/bin"]),
        (SOURCE_LOCAL, [under_home(".local", "bin")]),
        (SOURCE_HOMEBREW, [*var_dir("HOMEBREW_PREFIX", "bin"), *mac(["/opt/homebrew/bin"]),
                           "/usr/local/bin", "/home/linuxbrew/.linuxbrew/bin",
                           under_home(".linuxbrew", "bin")]),
        (SOURCE_NVM, [*var_dir("NVM_BIN"), *_nvm_bins(env, home)]),
        (SOURCE_BUN, [*var_dir("BUN_INSTALL", "bin"), under_home(".bun", "bin")]),
        (SOURCE_PNPM, [*var_dir("PNPM_HOME"), under_home(".local", "share", "pnpm"),
                       *mac([under_home("Library", "pnpm")])]),
        (SOURCE_VOLTA, [*var_dir("VOLTA_HOME", "bin"), under_home(".volta", "bin")]),
    ]
    seen: set[str] = set()
    out = []
    for source, folders in groups:
        for folder in folders:
            folder = os.path.normpath(folder)
            if folder not in seen:
                seen.add(folder)
                out.append((folder, source))
    return out


def _npmrc_prefix_bin(env: Mapping[str, str], home: str) -> list[str]:
    try:
        with open(os.path.join(home, ".npmrc"), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "prefix" and not key.lstrip().startswith(("#", ";")):
            value = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), value.strip())
            value = value.strip("\"'")
            if value.startswith("~"):
                value = home + value[1:]
            return [os.path.join(value, "bin")] if os.path.isabs(value) else []
    return []


def _version_key(name: str) -> tuple[int, tuple[int, ...], str]:
    numbers = re.findall(r"\d+", name)
    parsed = tuple(int(n) for n in numbers[:3])
    return (1 if parsed else 0, parsed, name)


def _nvm_bins(env: Mapping[str, str], home: str) -> list[str]:
    roots = [env["NVM_DIR"]] if env.get("NVM_DIR") else []
    roots.append(os.path.join(home, ".nvm"))
    out = []
    for root in roots:
        versions = os.path.join(root, "versions", "node")
        try:
            names = os.listdir(versions)
        except OSError:
            continue
        for name in sorted(names, key=_version_key, reverse=True):
            out.append(os.path.join(versions, name, "bin"))
    return out


def _shorten(folder: str, home: str) -> str:
    if home and (folder == home or folder.startswith(home.rstrip(os.sep) + os.sep)):
        return "~" + folder[len(home.rstrip(os.sep)):]
    return folder


def _in(folder: str, program: str) -> str | None:
    return shutil.which(program, path=folder)


class _Search:
    """One lookup: remembers the first file by that name that was not executable."""

    def __init__(self, program: str) -> None:
        self.program = program
        self.not_executable: str | None = None

    def first(self, folders: list[str]) -> tuple[str, str] | None:
        """(folder, program path) of the first folder holding a runnable ``program``."""
        for folder in folders:
            hit = _in(folder, self.program)
            if hit is not None:
                return folder, hit
            if self.not_executable is None:
                candidate = os.path.join(folder, self.program)
                if os.path.isfile(candidate):
                    self.not_executable = candidate
        return None


def _checked_path(program: str) -> str:
    """A program given with a folder: used as is, if it can be run."""
    if not os.path.exists(program):
        raise ProgramNotFound(f"{program} does not exist")
    if not os.path.isfile(program):
        raise ProgramNotFound(f"{program} is not a file")
    if not os.access(program, os.X_OK):
        raise ProgramNotFound(f"{program} is not executable (chmod +x it, or reinstall)")
    return program


def _location(found: str, source: str, folder: str | None) -> Location:
    path_dirs = (folder,) if folder else ()
    native = find_native(found)
    if native is None:
        return Location(found, found, source, path_dirs)
    return Location(native.program, found, source, (*path_dirs, *native.path_dirs),
                    tuple(native.env.items()), native.unset, native=True, args=native.args)


async def find_program(program: str, env: Mapping[str, str], *, use_login_shell: bool = True,
                       shell_timeout: float = login_shell.LOGIN_SHELL_TIMEOUT_S) -> Location:
    """Locate ``program`` for a process that will get ``env``; raise :class:`ProgramNotFound`.

    A program given with a folder (absolute or relative) is taken as is; a bare name is searched
    in the order of this module's docstring.
    """
    if not program:
        raise ProgramNotFound("the adapter's command is empty")
    if os.sep in program or (os.altsep and os.altsep in program):
        return _location(_checked_path(program), SOURCE_GIVEN, None)
    search = _Search(program)
    on_path = path_entries(env.get("PATH", os.defpath))
    hit = search.first(on_path)
    if hit is not None:
        return _location(hit[1], SOURCE_PATH, None)
    searched = set(on_path)
    shell_note = ""
    if use_login_shell:
        answer = await login_shell.login_shell_path(env, shell_timeout)
        if answer.path is None:
            shell_note = f" (could not read it: {answer.error})"
        shell_dirs = [d for d in path_entries(answer.path) if d not in searched]
        hit = search.first(shell_dirs)
        if hit is not None:
            return _location(hit[1], SOURCE_LOGIN_SHELL, hit[0])
        searched.update(shell_dirs)
    extra = [(f, s) for f, s in install_folders(env) if f not in searched]
    hit = search.first([f for f, _ in extra])
    if hit is not None:
        return _location(hit[1], dict(extra)[hit[0]], hit[0])
    if search.not_executable is not None:
        raise ProgramNotFound(f"found {search.not_executable}, but it is not executable "
                              "(chmod +x it, or reinstall)")
    home = env.get("HOME") or os.path.expanduser("~")
    where = ", ".join(_shorten(f, home) for f, _ in extra)
    shell = f", in your login shell's PATH{shell_note}" if use_login_shell else ""
    raise ProgramNotFound(f"{program!r} not found on PATH{shell} or in {where or 'no other folder'}")
