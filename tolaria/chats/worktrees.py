"""A new git worktree per chat (issue 18): the chat works on its own branch in its own folder, so
its agent's edits never mix with the user's checkout or another chat's.

``create`` makes ``<repo>/../<repo name>-tolaria-<chat id>`` with ``git worktree add`` on a new
branch ``tolaria/chat-<chat id>`` from HEAD, and the chat's folder becomes the same place inside
it (a chat opened on ``repo/src`` works in ``…-tolaria-7/src``). The chat remembers it as a
store marker (``chat_worktree``). ``remove`` runs ``git worktree remove`` *without* ``--force``:
git refuses when the worktree has modified or untracked files, and the refusal is said, never
overridden; the branch is always kept (it may hold the chat's commits).

No Qt; git runs in the caller's thread (the window calls these through ``asyncio.to_thread``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tolaria.core import checkpoints as ck
from tolaria.core.store.db import Store

#: On a chat: ``{"repo", "path", "branch", "folder"}``, the worktree it was created in.
MARKER_WORKTREE = "chat_worktree"


class WorktreeError(Exception):
    """A worktree could not be made or removed; the message says why, in one line."""


@dataclass(frozen=True)
class ChatWorktree:
    #: The top of the repository's main working tree.
    repo: Path
    #: The top of the chat's worktree.
    path: Path
    branch: str
    #: The chat's working folder (``path`` or a folder inside it).
    folder: Path


def branch_name(conversation_id: int) -> str:
    return f"tolaria/chat-{conversation_id}"


def worktree_path(repo: Path, conversation_id: int) -> Path:
    return repo.parent / f"{repo.name}-tolaria-{conversation_id}"


def create(folder: Path, conversation_id: int) -> ChatWorktree:
    """A new worktree for the chat, on a new branch from HEAD of ``folder``'s repository."""
    repo = ck.find_repo(folder)
    if repo is None:
        raise WorktreeError(f"{folder} is not inside a git repository: no worktree made")
    if ck.git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}",
              check=False).returncode != 0:
        raise WorktreeError(f"{repo} has no commit yet: a worktree starts from one")
    path = worktree_path(repo, conversation_id)
    if path.exists():
        raise WorktreeError(f"{path} already exists: no worktree made")
    branch = branch_name(conversation_id)
    try:
        ck.git(repo, "worktree", "add", "--quiet", "-b", branch, str(path), "HEAD")
    except ck.CheckpointError as exc:
        raise WorktreeError(f"no worktree made: {exc}") from exc
    inside = folder.resolve().relative_to(repo.resolve())
    return ChatWorktree(repo, path, branch, path / inside)


def remove(worktree: ChatWorktree) -> None:
    """``git worktree remove`` (never forced); WorktreeError says why git kept it."""
    if not worktree.path.exists():
        ck.git(worktree.repo, "worktree", "prune", check=False)
        return
    done = ck.git(worktree.repo, "worktree", "remove", str(worktree.path), check=False)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        why = said[-1] if said else f"git exited with {done.returncode}"
        if "modified or untracked" in why:
            why = "it has uncommitted or untracked files (commit or move them, then remove it)"
        raise WorktreeError(f"kept the worktree {worktree.path}: {why}")


def record(store: Store, conversation_id: int, worktree: ChatWorktree) -> None:
    store.add_marker(conversation_id, MARKER_WORKTREE, data={
        "repo": str(worktree.repo), "path": str(worktree.path), "branch": worktree.branch,
        "folder": str(worktree.folder)})


def recorded(store: Store, conversation_id: int) -> ChatWorktree | None:
    """The worktree the chat was created in, if any."""
    for marker in reversed(store.markers(conversation_id, MARKER_WORKTREE)):
        data = marker.data if isinstance(marker.data, dict) else {}
        if {"repo", "path", "branch", "folder"} <= data.keys():
            return ChatWorktree(Path(str(data["repo"])), Path(str(data["path"])),
                                str(data["branch"]), Path(str(data["folder"])))
    return None


def every_recorded(store: Store) -> dict[int, ChatWorktree]:
    """Chat id -> its worktree, for every chat that has one."""
    found: dict[int, ChatWorktree] = {}
    for marker in store.markers_of_kind(MARKER_WORKTREE):
        worktree = recorded(store, marker.conversation_id)
        if worktree is not None:
            found[marker.conversation_id] = worktree
    return found
