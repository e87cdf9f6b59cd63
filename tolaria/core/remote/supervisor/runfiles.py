"""A run's private files on the host (the START's ``files``: its agent's MCP configurations,
ADR 0019 "On a host"): written in a 0700 folder next to the kept runs' sockets, removed when the
run ends, and by the watcher when the supervisor was killed."""

from __future__ import annotations

import os
import shutil
import sys

# POSIX only: the imports follow the assert, so that mypy --platform win32 skips them too.
assert sys.platform != "win32", "the supervisor runs on POSIX hosts (its frames: any)"

from .frames import FILES  # noqa: E402
from .keep import socket_path  # noqa: E402

_WRITTEN: list[str] = []  # run_files' folders: removed by main() when the run ends


def run_files(spec: dict[str, object], stream_id: str, argv: list[str],
              env: dict[str, str]) -> str | None:
    """The START's ``files`` (name -> text) written in the run's private folder (0700, files
    0600; next to the kept runs' sockets), its path put for FILES in ``argv`` and ``env``."""
    files = spec.get("files") or {}
    path = socket_path(stream_id)
    if not files:
        return None
    if path is None:
        return f"not a stream id: {stream_id[:80]!r}"
    folder = path[:-len(".sock")] + ".files"
    try:
        os.makedirs(os.path.dirname(folder), 0o700, exist_ok=True)
        os.mkdir(folder, 0o700)
        _WRITTEN.append(folder)
        for name, text in files.items():  # type: ignore[attr-defined]
            fd = os.open(os.path.join(folder, os.path.basename(str(name))),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(str(text))
    except OSError as exc:
        return f"cannot write the run's files in {folder}: {exc.strerror or exc}"
    argv[:] = [a.replace(FILES, folder) for a in argv]
    env.update({k: v.replace(FILES, folder) for k, v in env.items() if FILES in v})
    return None


def remove_written() -> None:
    """The run ended: its files go."""
    for folder in _WRITTEN:
        shutil.rmtree(folder, ignore_errors=True)


def remove_files_of(stream_id: str) -> None:
    """The supervisor was killed: the watcher removes the run's files."""
    sock = socket_path(stream_id)
    if sock is not None:
        shutil.rmtree(sock[:-len(".sock")] + ".files", ignore_errors=True)
