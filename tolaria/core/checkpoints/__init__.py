"""Checkpoints: a git working folder's state before and after a turn, kept out of the user's repo.

Why a store of Tolaria's own (ADR 0010): the user's index, branches, stash and refs are theirs,
and what a checkpoint holds (an untracked ``.env``) must never leave the machine. A snapshot is
written through a throwaway copy of the user's index into a bare repository under Tolaria's data
folder that borrows the user's objects (``objects/info/alternates``); no ``git push --mirror``,
mirror clone or ``git log --all`` of the user's repository sees it. Git runs nothing of the
repository's (no filters, textconv, external diff, hooks, fsmonitor, pager, helpers, transports).
Untracked files are taken within limits (size cap, heavy folders, count/bytes/time budgets) and
what is left out is said. Reverting writes files in the working tree only, byte for byte.

Non-git folders get no checkpoint (``find_repo`` returns None): the caller says so and offers
nothing that could lose work.
"""

from tolaria.core.checkpoints.gitrun import (
    Cancel,
    CheckpointCancelled,
    CheckpointError,
    GitTimeout,
)
from tolaria.core.checkpoints.model import (
    HEAVY_DIRS,
    MB,
    Checkpoint,
    FileChange,
    Hunk,
    Limits,
    Skipped,
)
from tolaria.core.checkpoints.ops import (
    blob_bytes,
    changes,
    delete,
    file_diff,
    file_diff_bytes,
    find_repo,
    git,
    hunks,
    load,
    ref_name,
    revert_file,
    revert_hunk,
    rewind,
    skipped_of,
    snapshot,
    tree_entries,
)
from tolaria.core.checkpoints.store import REF_PREFIX, store_of

__all__ = [
    "HEAVY_DIRS", "MB", "REF_PREFIX", "Cancel", "Checkpoint", "CheckpointCancelled",
    "CheckpointError", "FileChange", "GitTimeout", "Hunk", "Limits", "Skipped", "blob_bytes",
    "changes", "delete", "file_diff", "file_diff_bytes", "find_repo", "git", "hunks", "load",
    "ref_name", "revert_file", "revert_hunk", "rewind", "skipped_of", "snapshot", "store_of",
    "tree_entries",
]
