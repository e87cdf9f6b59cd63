"""Browsing and checking folders on a host (issue 25.6): the remote chat's folder picker.

One ssh round trip per folder listed, through the user's ssh (``Target.argv``): a small
standard-library snippet run by the host's Python lists one folder as JSON (names, whether each
is a folder, whether it is a git working tree) or says in one line why it cannot (no such
folder, not a folder, no permission). The path travels as an argument quoted word by word (the
remote login shell sees one quoted word, never an expression). Blocking with a time limit:
callers run it off the GUI thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tolaria.core.remote.hostcall import HostError, run_remote
from tolaria.core.remote.hosts import Target

#: Seconds one listing may take (the connection included).
LIST_TIMEOUT_S = 20.0
#: Entries listed at most per folder (the rest is said to be cut).
MOST_ENTRIES = 2000

_SNIPPET = r"""
import json, os, sys
p = sys.argv[1] or "~"
most = int(sys.argv[2])
p = os.path.abspath(os.path.expanduser(p))
def say(o):
    sys.stdout.write(json.dumps(o) + "\n")
if not os.path.exists(p):
    say({"error": "no such folder: %s" % p}); sys.exit(0)
if not os.path.isdir(p):
    say({"error": "not a folder: %s" % p}); sys.exit(0)
if not os.access(p, os.R_OK | os.X_OK):
    say({"error": "no permission to read the folder %s" % p}); sys.exit(0)
try:
    names = sorted((n for n in os.listdir(p) if n != ".git"),
                   key=lambda n: (n.startswith("."), n.lower()))
except OSError as e:
    say({"error": "cannot read the folder %s: %s" % (p, e.strerror or e)}); sys.exit(0)
out = []
for n in names[:most]:
    f = os.path.join(p, n)
    d = os.path.isdir(f)
    out.append([n, d, d and os.path.exists(os.path.join(f, ".git"))])
say({"path": p, "parent": os.path.dirname(p), "entries": out, "cut": len(names) > most,
     "git": os.path.exists(os.path.join(p, ".git"))})
"""


@dataclass(frozen=True)
class Entry:
    name: str
    is_dir: bool
    is_git: bool


@dataclass(frozen=True)
class Listing:
    """One folder on the host: its absolute path there, its parent and its entries."""

    path: str
    parent: str
    entries: tuple[Entry, ...]
    #: More entries than MOST_ENTRIES: the rest is not shown.
    cut: bool = False
    #: The folder itself is a git working tree's top.
    is_git: bool = False

    @property
    def folders(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.is_dir)


def list_folder(target: Target, path: str, *, timeout: float = LIST_TIMEOUT_S) -> Listing:
    """The folder ``path`` on ``target`` ("" or "~": the home folder there); HostError with
    one line when it cannot be listed (ssh's reason, or no such folder, not a folder, no
    permission)."""
    if any(not c.isprintable() for c in path):
        raise HostError("the folder contains control characters")
    out = run_remote(target, [target.python, "-c", _SNIPPET, path, str(MOST_ENTRIES)],
                     timeout=timeout, most=16 << 20)
    try:
        data = json.loads(out.decode(errors="surrogateescape").strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise HostError(f"{target.label} gave an answer Tolaria cannot read") from None
    if not isinstance(data, dict):
        raise HostError(f"{target.label} gave an answer Tolaria cannot read")
    if "error" in data:
        raise HostError(f"{data['error']} on {target.label}")
    entries = tuple(Entry(str(n), bool(d), bool(g)) for n, d, g in data.get("entries") or ())
    return Listing(str(data["path"]), str(data.get("parent") or ""), entries,
                   bool(data.get("cut")), bool(data.get("git")))


def check_folder(target: Target, path: str, *, timeout: float = LIST_TIMEOUT_S) -> str:
    """``path`` checked on ``target`` (it exists, is a folder, can be read): its absolute path
    there; HostError with the one-line reason otherwise."""
    return list_folder(target, path, timeout=timeout).path
