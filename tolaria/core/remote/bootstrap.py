"""Bringing the supervisor to a host: content-addressed, checked, copied once per version.

The host runs ``python3 -c BOOTSTRAP HASH SIZE [CACHE_DIR]``. The bootstrap checks the Python
version, looks for ``supervisor-HASH.pyz`` in the cache folder (the supervisor's bundle:
bundle.py) and checks its SHA-256; when it is missing or damaged it prints ``TOLARIA-NEED``,
reads exactly SIZE bytes from stdin (the link sends the file there, on the same connection: no
second ssh), checks them, writes the file atomically, and runs it (a ``.pyz`` with runpy, a
single-file program such as hostgit's ``NAME-HASH.py`` as its code). Problems are one
``TOLARIA-ERROR <message>`` line. The code is plain enough to parse on any Python 3, so that an
old one says it is too old instead of a syntax error.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from tolaria.core.remote import bundle

NEED = b"TOLARIA-NEED"
ERROR = b"TOLARIA-ERROR "
MIN_PYTHON = (3, 8)

BOOTSTRAP = r"""
import sys, os, hashlib
H, N = sys.argv[1], int(sys.argv[2])
def say(m):
    sys.stdout.write(m + "\n"); sys.stdout.flush()
if sys.version_info < (%d, %d):
    say("TOLARIA-ERROR python on this host is %%d.%%d; Tolaria's supervisor needs %d.%d or newer"
        %% tuple(sys.version_info[:2])); sys.exit(3)
d = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
    "tolaria", "remote")
d = os.path.expanduser(d)
f = os.path.join(d, "supervisor-" + H + ".pyz")
def ok(p):
    try:
        with open(p, "rb") as h:
            return hashlib.sha256(h.read()).hexdigest() == H
    except OSError:
        return False
if not ok(f):
    say("TOLARIA-NEED")
    b = b""
    while len(b) < N:
        c = os.read(0, N - len(b))
        if not c:
            sys.exit(4)
        b += c
    if hashlib.sha256(b).hexdigest() != H:
        say("TOLARIA-ERROR the supervisor arrived damaged (checksum mismatch)"); sys.exit(5)
    t = f + ".%%d.tmp" %% os.getpid()
    try:
        os.makedirs(d, 0o700, exist_ok=True)
        with open(t, "wb") as h:
            h.write(b)
        os.replace(t, f)
    except OSError as e:
        try:
            os.unlink(t)  # a full disk: no half-written file left behind
        except OSError:
            pass
        say("TOLARIA-ERROR cannot write Tolaria's cache folder %%s on this host: %%s"
            %% (d, e.strerror or e)); sys.exit(6)
sys.argv = [f]
if f.endswith(".pyz"):
    import runpy
    runpy.run_path(f, run_name="__main__")
else:
    g = {"__name__": "__main__", "__file__": f}
    with open(f, "rb") as h:
        code = compile(h.read(), f, "exec")
    exec(code, g)
""" % (*MIN_PYTHON, *MIN_PYTHON)  # noqa: UP031  (a template full of braces)


@functools.cache
def supervisor_bytes() -> bytes:
    """The supervisor's bundle, built from its source files as shipped in the wheel."""
    return bundle.build(bundle.sources())


def supervisor_hash() -> str:
    return hashlib.sha256(supervisor_bytes()).hexdigest()


def remote_argv(python: str, cache_dir: str | None = None) -> list[str]:
    """What runs on the host: the bootstrap, with the supervisor's hash and size."""
    return [python, "-c", BOOTSTRAP, supervisor_hash(), str(len(supervisor_bytes())),
            cache_dir or ""]


@functools.cache
def program_bytes(name: str) -> bytes:
    """Another standard-library program of this folder shipped the same way (``hostgit``)."""
    return (Path(__file__).resolve().parent / f"{name}.py").read_bytes()


def program_argv(name: str, python: str, cache_dir: str | None = None) -> list[str]:
    """The bootstrap for ``name``'s program: cached as ``NAME-HASH.py`` next to the supervisor."""
    data = program_bytes(name)
    code = BOOTSTRAP.replace('"supervisor-"', f'"{name}-"').replace('".pyz"', '".py"').replace(
        "the supervisor arrived", f"Tolaria's {name} arrived")
    return [python, "-c", code, hashlib.sha256(data).hexdigest(), str(len(data)),
            cache_dir or ""]
