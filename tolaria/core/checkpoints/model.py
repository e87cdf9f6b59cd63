"""The values checkpoints deal in: a checkpoint, a changed file, a hunk, what a snapshot left out."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tolaria.core.checkpoints.gitrun import CheckpointError

MB = 1024 * 1024
#: Well-known folders of installed packages and build output: never snapshotted when untracked
#: and not ignored (their tracked files still are).
HEAVY_DIRS = ("node_modules", ".venv", "venv", "target", "dist", "build", "__pycache__",
              ".next", ".gradle", ".tox", ".mypy_cache", ".pytest_cache", ".terraform")


@dataclass(frozen=True)
class Limits:
    """What one snapshot may take of the untracked files (defaults: docs/SETTINGS.md)."""

    #: An untracked file bigger than this is left out.
    max_file_bytes: int = 10 * MB
    #: At most this many untracked files per snapshot ...
    max_files: int = 5000
    #: ... and at most this many bytes of them; what is beyond is left out.
    max_bytes: int = 50 * MB
    #: Seconds for finding the untracked files; past it only tracked files are captured.
    time_budget_s: float = 3.0
    heavy_dirs: tuple[str, ...] = HEAVY_DIRS


@dataclass(frozen=True)
class Skipped:
    """What a snapshot did not capture, and why. Folders end with ``/``."""

    large: tuple[str, ...] = ()
    heavy: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()
    over_budget: tuple[str, ...] = ()
    #: Files with a filter (Git LFS, git-crypt) too big to hash from their work-tree bytes.
    filtered: tuple[str, ...] = ()
    #: The time budget ran out: no untracked file was captured.
    untracked_off: bool = False
    max_file_bytes: int = 10 * MB

    def __bool__(self) -> bool:
        return bool(self.large or self.heavy or self.unreadable or self.over_budget
                    or self.filtered or self.untracked_off)

    def covers(self, path: str) -> bool:
        """Whether ``path`` may exist although this snapshot does not hold it."""
        if self.untracked_off:
            return True
        for entry in (*self.large, *self.heavy, *self.unreadable, *self.over_budget,
                      *self.filtered):
            if path == entry or (entry.endswith("/") and path.startswith(entry)):
                return True
        return False

    def summary(self) -> str:
        """``not tracked: 1 file over 10 MB, node_modules/`` ('' when nothing was left out)."""
        parts = []
        if self.untracked_off:
            parts.append("new files (finding them took too long; only tracked files captured)")
        if self.large:
            size = f"{self.max_file_bytes / MB:g} MB"
            parts.append(_count(self.large, f"over {size}", name_one=len(self.large) == 1))
        parts += list(self.heavy[:4]) + ([f"{len(self.heavy) - 4} more folders"]
                                         if len(self.heavy) > 4 else [])
        if self.unreadable:
            parts.append(_count(self.unreadable, "unreadable"))
        if self.over_budget:
            parts.append(_count(self.over_budget, "beyond the per-turn budget"))
        if self.filtered:
            parts.append(_count(self.filtered, "filtered (LFS) and too big to hash"))
        return "not tracked: " + ", ".join(parts) if parts else ""

    def to_json(self) -> dict[str, object]:
        return {"large": list(self.large), "heavy": list(self.heavy),
                "unreadable": list(self.unreadable), "over_budget": list(self.over_budget),
                "filtered": list(self.filtered), "untracked_off": self.untracked_off,
                "max_file_bytes": self.max_file_bytes}

    @classmethod
    def from_json(cls, data: object) -> Skipped:
        if not isinstance(data, dict):
            return cls()

        def names(key: str) -> tuple[str, ...]:
            value = data.get(key)
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        size = data.get("max_file_bytes")
        return cls(names("large"), names("heavy"), names("unreadable"), names("over_budget"),
                   names("filtered"), bool(data.get("untracked_off")),
                   size if isinstance(size, int) else 10 * MB)

    def merged(self, other: Skipped) -> Skipped:
        def both(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys((*a, *b)))

        return Skipped(both(self.large, other.large), both(self.heavy, other.heavy),
                       both(self.unreadable, other.unreadable),
                       both(self.over_budget, other.over_budget),
                       both(self.filtered, other.filtered),
                       self.untracked_off or other.untracked_off,
                       max(self.max_file_bytes, other.max_file_bytes))


def _count(items: tuple[str, ...], why: str, name_one: bool = False) -> str:
    if len(items) == 1:
        return f"1 file {why}" if not name_one else f"1 file {why} ({items[0]})"
    return f"{len(items)} files {why}"


def message_of(ref: str, skipped: Skipped) -> str:
    return f"tolaria checkpoint {ref}\n\n{json.dumps({'skipped': skipped.to_json()})}\n"


def skipped_of_message(text: str) -> Skipped:
    _subject, _, body = text.partition("\n\n")
    try:
        data = json.loads(body) if body.strip() else {}
    except ValueError:
        return Skipped()
    return Skipped.from_json(data.get("skipped") if isinstance(data, dict) else None)


@dataclass(frozen=True)
class Checkpoint:
    """One snapshot: the working tree's top folder and the commit that holds its files.

    Built from a stored (repo, commit) pair it is complete: the store is found from ``repo``,
    and what the snapshot left out is read from the commit when needed."""

    repo: Path
    commit: str
    ref: str
    skipped: Skipped | None = field(default=None, compare=False)


@dataclass(frozen=True)
class FileChange:
    """A file a turn changed: ``status`` is ``added``, ``modified``, ``deleted`` or ``type``."""

    path: str
    status: str


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk of a file's diff, with the file header it needs to be applied alone.

    ``header``/``body`` are for showing (undecodable bytes replaced); ``raw`` holds the exact
    bytes of the patch when the diff came as bytes, and is what a revert applies."""

    header: str
    body: str
    raw: bytes = b""

    @property
    def patch(self) -> str:
        return self.header + self.body

    @property
    def patch_bytes(self) -> bytes:
        return self.raw or self.patch.encode(errors="surrogateescape")


_STATUS = {"A": "added", "M": "modified", "D": "deleted", "T": "type"}


def changes_of(name_status: str, before: Skipped, after: Skipped) -> list[FileChange]:
    """``git diff-tree --name-status -z`` output as changes; a file one side holds and the
    other left out (too big, unreadable, ...) is not a change."""
    fields = name_status.split("\0")
    found: list[FileChange] = []
    for status, path in zip(fields[0::2], fields[1::2], strict=False):
        if not status:
            continue
        kind = _STATUS.get(status[0], "modified")
        if (kind == "added" and before.covers(path)) or (
                kind == "deleted" and after.covers(path)):
            continue
        found.append(FileChange(path=path, status=kind))
    return found


def entries_of(ls_tree: str) -> list[tuple[str, str, str, str]]:
    """``git ls-tree -z`` output as (mode, type, object id, path)."""
    found = []
    for entry in filter(None, ls_tree.split("\0")):
        meta, _, name = entry.partition("\t")
        mode, kind, sha = meta.split()
        found.append((mode, kind, sha, name))
    return found


def git_failure(command: str, stderr: bytes, code: int) -> CheckpointError:
    """Why a git call in the store failed: content gone (git gc) or git's last line."""
    why = stderr.decode(errors="replace")
    if any(said in why for said in ("bad object", "unable to read", "missing", "bad file")):
        return CheckpointError("that checkpoint's content is gone from the repository (its "
                               "objects were removed, e.g. by git gc): nothing was changed")
    last = why.strip().splitlines()
    return CheckpointError(f"git {command} failed: {last[-1] if last else code}")
