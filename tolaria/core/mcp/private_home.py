"""Gemini CLI's MCP servers through a private home (ADR 0019, ``home_env``).

Gemini CLI 0.61 reads a system (defaults) settings file only when it and every folder above it
belong to root, so a run as a normal user cannot add a layer of its own there. What it does
honour for every user is ``GEMINI_CLI_HOME``: the folder whose ``.gemini`` it uses in place of
``~/.gemini``. Tolaria points it at ``<run folder>/home``, whose ``.gemini`` holds

* ``settings.json``: the user's own settings (read, never written) with Tolaria's servers
  added (a server of the user's own of the same name wins, as before); a file of theirs that
  is no JSON object is linked instead (Gemini reports it, and gets no servers of Tolaria's);
* a symlink to every other entry of the real ``~/.gemini`` (credentials, sessions, memory,
  commands, extensions...), so Gemini reads and writes the user's files in place; and
  symlinks to the files Gemini may create there (credentials after a login, the installation
  id...), so a new one lands in the real folder too;
* ``~/.agents`` likewise (user skills).

What Gemini creates there anyway (a new folder, or a file it replaced by renaming over the
link) is moved into the real ``~/.gemini`` when the run ends (``sync_back``), unless the user's
folder got an entry of that name meanwhile. A change Gemini makes to its *settings* during a
headless run is not kept (the user's file is never written).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

GEMINI_DIR = ".gemini"
SETTINGS = "settings.json"
#: The private home inside the run's folder.
HOME = "home"
#: Files Gemini may create in ~/.gemini (linked even when missing: a write creates the target).
CREATED_FILES = ("oauth_creds.json", "google_accounts.json", "installation_id",
                 "trustedFolders.json", "projects.json", "state.json", "mcp-oauth-tokens.json",
                 "a2a-oauth-tokens.json", "policy_integrity.json", "GEMINI.md", ".env",
                 "keybindings.json", "user_id")
#: Beside ~/.gemini, in the home Gemini is given.
OTHER_ENTRIES = (".agents",)


def real_home(environ: Mapping[str, str], home_env: str) -> Path:
    """The home Gemini would use for this run: the user's own ``home_env``, else HOME."""
    for name in (home_env, "HOME", "USERPROFILE"):
        if environ.get(name):
            return Path(environ[name])
    return Path.home()


def user_settings(real: Path) -> dict[str, Any] | None:
    """The user's ``~/.gemini/settings.json`` as Gemini reads it (comments allowed): {} when
    there is none, None when it cannot be read as a JSON object (then it is linked as it is,
    and Gemini says what is wrong with it, as without Tolaria)."""
    path = real / GEMINI_DIR / SETTINGS
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError):
        return None
    try:
        data = json.loads(strip_comments(text)) if text.strip() else {}
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def strip_comments(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments outside strings (strip-json-comments,
    which Gemini CLI reads its settings with)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def links_refused(folder: Path) -> bool:
    """True when no symlink can be made in ``folder`` (Windows without the right to)."""
    probe = folder / "link-probe"
    try:
        probe.symlink_to(folder)
    except (OSError, NotImplementedError):
        return True
    probe.unlink()
    return False


def build(folder: Path, real: Path, settings: dict[str, Any] | None) -> Path:
    """The private home under ``folder`` (0700) for a user whose home is ``real``; returns it."""
    home = folder / HOME
    home.mkdir(mode=0o700)
    own = home / GEMINI_DIR
    own.mkdir(mode=0o700)
    theirs = real / GEMINI_DIR
    names = set(CREATED_FILES)
    with contextlib.suppress(OSError):
        names.update(p.name for p in theirs.iterdir())
    if settings is not None:
        names.discard(SETTINGS)
    for name in sorted(names):
        (own / name).symlink_to(theirs / name)
    for name in OTHER_ENTRIES:
        (home / name).symlink_to(real / name)
    if settings is None:
        return home
    fd = os.open(own / SETTINGS, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                 | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(settings, out, indent=1)
    return home


def sync_back(home: Path, real: Path) -> None:
    """Move what Gemini created in the private ``.gemini`` (not a link, not the settings) into
    the real one (best effort): a new entry is moved, a new folder's content merged into one
    that appeared there meanwhile (another run's); an entry of the user's of the same name
    wins, except one of the files Gemini itself replaces by renaming (CREATED_FILES)."""
    own = home / GEMINI_DIR
    theirs = real / GEMINI_DIR
    try:
        entries = list(own.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name == SETTINGS or entry.is_symlink():
            continue
        with contextlib.suppress(OSError, shutil.Error):
            theirs.mkdir(mode=0o700, parents=True, exist_ok=True)
            target = theirs / entry.name
            if entry.name in CREATED_FILES and entry.is_file() and not target.is_dir():
                os.replace(entry, target)  # Gemini replaced a file it owns by renaming
            else:
                _merge(entry, target)


def _merge(entry: Path, target: Path) -> None:
    if not target.exists() and not target.is_symlink():
        shutil.move(str(entry), str(target))
    elif entry.is_dir() and not entry.is_symlink() and target.is_dir() \
            and not target.is_symlink():
        for child in list(entry.iterdir()):
            with contextlib.suppress(OSError, shutil.Error):
                _merge(child, target / child.name)
