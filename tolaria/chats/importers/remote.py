"""The CLIs' stored sessions on a host (``tolaria import --host H``, issue 25.6): listed and
fetched through the user's ssh in one round trip, within size limits, into a private local
folder laid out like the host's home, then read by the same parsers as local files.

The host runs a small standard-library snippet (its Python): it globs each CLI's session files
under its home (the same patterns as the importers' ``find``), skips what is over the limits,
and sends the rest as one tar stream; what it left out is named. Locally the archive is
unpacked file by file (regular files only: no links, no absolute or climbing paths) into a 0700 folder
removed afterwards. The CLIs' files there are only read.
"""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tolaria.core.remote.hostcall import CancelFlag, HostError, run_remote
from tolaria.core.remote.hosts import Target

#: Per agent: glob patterns under the home folder (as each importer's ``find``).
PATTERNS: dict[str, tuple[str, ...]] = {
    "claude": (".claude/projects/*/*.jsonl",),
    "codex": (".codex/sessions/*/*/*/rollout-*.jsonl",),
    "gemini": (".gemini/tmp/*/chats/session-*.jsonl", ".gemini/tmp/*/chats/session-*.json"),
    "qwen": (".qwen/projects/*/chats/*.jsonl", ".qwen/tmp/*/chats/*.jsonl"),
    "opencode": (".local/share/opencode/opencode.db",),
}
#: One file over this is not fetched (said in the report).
MAX_FILE_BYTES = 64 << 20
#: All files together at most this (the rest, newest first kept, is said).
MAX_TOTAL_BYTES = 512 << 20
FETCH_TIMEOUT_S = 300.0

_SNIPPET = r"""
import glob, io, json, os, sys, tarfile
home = os.path.expanduser("~")
patterns, cap, total_cap = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
found = []
for pattern in patterns:
    for path in glob.glob(os.path.join(home, pattern)):
        try:
            st = os.stat(path)
        except OSError:
            continue
        found.append((st.st_mtime, st.st_size, path))
found.sort(reverse=True)
left, total, taken = [], 0, []
for mtime, size, path in found:
    rel = os.path.relpath(path, home)
    if size > cap or total + size > total_cap:
        left.append([rel, size])
        continue
    total += size
    taken.append((rel, path))
out = sys.stdout.buffer
head = json.dumps({"home": home, "left": left}).encode()
out.write(b"%d\n" % len(head) + head)
with tarfile.open(fileobj=out, mode="w|") as tar:
    for rel, path in taken:
        try:
            with open(path, "rb") as fh:
                data = fh.read(cap + 1)[:cap]
        except OSError:
            continue
        info = tarfile.TarInfo(rel)
        info.size = len(data)
        info.mtime = int(os.path.getmtime(path))
        tar.addfile(info, io.BytesIO(data))
"""


@dataclass
class Fetched:
    """What came from the host: its home folder's path there and the files left out."""

    home: str
    #: (path under the home folder, size) of each file over the limits.
    left_out: list[tuple[str, int]] = field(default_factory=list)
    files: int = 0


def fetch_sessions(target: Target, agents: list[str], into: str, *,
                   timeout: float = FETCH_TIMEOUT_S, cancel: CancelFlag | None = None) -> Fetched:
    """Copy the session files of ``agents`` from ``target``'s home into the folder ``into``
    (same layout); HostError with one line when the host cannot be read (Cancelled, ssh
    killed, when ``cancel`` is set)."""
    patterns = [p for agent in agents for p in PATTERNS.get(agent, ())]
    out = run_remote(target, [target.python, "-c", _SNIPPET, json.dumps(patterns),
                              str(MAX_FILE_BYTES), str(MAX_TOTAL_BYTES)],
                     timeout=timeout, most=MAX_TOTAL_BYTES + (16 << 20), cancel=cancel)
    size_line, _, rest = out.partition(b"\n")
    try:
        size = int(size_line)
        head = json.loads(rest[:size])
        fetched = Fetched(str(head["home"]), [(str(p), int(n)) for p, n in head["left"]])
    except (ValueError, KeyError, TypeError):
        raise HostError(f"{target.label} gave an answer Tolaria cannot read") from None
    try:
        with tarfile.open(fileobj=io.BytesIO(rest[size:]), mode="r|") as tar:
            for member in tar:
                name = PurePosixPath(member.name)
                if not member.isfile() or name.is_absolute() or ".." in name.parts:
                    continue  # regular files under the home folder only: no links, no climbing
                data = tar.extractfile(member)
                if data is None:
                    continue
                local = Path(into, *name.parts)
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(data.read())
                fetched.files += 1
    except (tarfile.TarError, OSError) as exc:
        raise HostError(f"the session files from {target.label} arrived damaged: {exc}") from exc
    return fetched
