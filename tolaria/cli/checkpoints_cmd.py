"""``tolaria checkpoints [--prune [--older-than DAYS] [--yes]] [--json]`` and
``tolaria chats --delete ID [--yes]``: the checkpoint storage meter and its prune, and deleting
a chat (its checkpoints with it) without the window (issue 21 item 7).

Exit codes: 0 done, 1 refused for safety (the message says what and how to go on), 2 bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tolaria.chats.checkpoint_storage import RepoCheckpoints

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT = 0, 1, 2


def cmd_checkpoints(as_json: bool, prune: bool, older_than: float | None, yes: bool) -> int:
    from tolaria.chats import checkpoint_storage as cs
    from tolaria.cli.storeopen import open_store_or_say

    if older_than is not None and (older_than < 0 or not prune):
        print("tolaria: --older-than needs --prune and a number of days (0 or more)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    store = open_store_or_say()
    if isinstance(store, int):
        return store
    try:
        repos = cs.survey(store, older_than)
        if not prune:
            return _show(repos, as_json)
        old = sum(len(r.old) for r in repos)
        if old and not yes:
            print(f"tolaria: {cs.describe(repos, old_turns=True)} Nothing was removed: add "
                  "--yes to go ahead (or leave out --older-than to remove only the checkpoints "
                  "of deleted chats).", file=sys.stderr)
            return EXIT_REFUSED
        said = cs.describe(repos, old_turns=True)
        done = cs.prune(store, repos, old_turns=True)
    finally:
        store.close()
    if as_json:
        print(json.dumps({"refs_deleted": done.refs_deleted, "bytes_freed": done.bytes_freed,
                          "turns_noted": done.turns_noted}))
    else:
        print(f"{said} Removed {done.refs_deleted} refs, freed {cs.human_size(done.bytes_freed)}.")
    return EXIT_OK


def _show(rows: list[RepoCheckpoints], as_json: bool) -> int:
    from tolaria.chats.checkpoint_storage import human_size

    if as_json:
        print(json.dumps([{"repo": r.label, "store": str(r.usage.store),
                           "size_bytes": r.usage.size_bytes, "checkpoints": len(r.usage.refs),
                           "in_repository": sum(1 for x in r.usage.refs if x.legacy),
                           "of_deleted_chats": len(r.orphaned),
                           "repo_missing": r.usage.repo_missing} for r in rows], indent=2))
        return EXIT_OK
    if not rows:
        print("no checkpoints")
        return EXIT_OK
    for r in rows:
        extra = []
        if r.orphaned:
            extra.append(f"{len(r.orphaned)} of deleted chats")
        legacy = sum(1 for x in r.usage.refs if x.legacy)
        if legacy:
            extra.append(f"{legacy} still in the repository (an earlier Tolaria's)")
        if r.usage.repo_missing:
            extra.append("repository gone")
        tail = f" ({', '.join(extra)})" if extra else ""
        print(f"{human_size(r.usage.size_bytes):>10}  {len(r.usage.refs):>5} checkpoints  "
              f"{r.label}{tail}")
    return EXIT_OK


def cmd_delete_chat(chat_id: int, yes: bool) -> int:
    from tolaria.chats.attachments import delete_chat
    from tolaria.chats.checkpoints import TurnCheckpoints
    from tolaria.cli.storeopen import open_store_or_say
    from tolaria.core.process import control

    store = open_store_or_say()
    if isinstance(store, int):
        return store
    try:
        chat = store.get_conversation(chat_id)
        if chat is None:
            print(f"tolaria: no chat {chat_id} (see `tolaria chats`)", file=sys.stderr)
            return EXIT_BAD_INPUT
        live = control.live_stream_ids()
        if any(t.status == "running" and t.stream_id in live for t in store.turns(chat_id)):
            print(f"tolaria: chat {chat_id} is running a turn: stop it first "
                  "(`tolaria streams`, `tolaria abort ID`)", file=sys.stderr)
            return EXIT_REFUSED
        turns = len(store.turns(chat_id))
        if not yes and not _confirm(f"Delete chat {chat_id} \"{chat.title}\" ({turns} turns) "
                                    "and its checkpoints? [y/N] "):
            print(f"tolaria: chat {chat_id} kept (use --yes to delete without asking)",
                  file=sys.stderr)
            return EXIT_REFUSED
        service = TurnCheckpoints(store)
        repos: set[Path] = service.repos(chat)
        removed = service.delete_chat_now(chat, repos)  # blocking: no event loop here
        delete_chat(store, chat_id)  # with its attachments' private copies
    finally:
        store.close()
    print(f"deleted chat {chat_id} and {removed} checkpoint refs")
    return EXIT_OK


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        return False
