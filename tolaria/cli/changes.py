"""``tolaria changes / revert / rewind / undo``: review and undo a chat's turns without the window.

The same store, checkpoints and safety rules as the window (tolaria/chats/restore.py): a file
changed after the turn, an agent writing in the repository (any Tolaria process), a turn
recorded after a restart, and every rewind need ``--yes``; a file that cannot be restored (a
submodule, a file that became a folder, no permission) stops it with nothing changed. Each
restore keeps a copy of what it replaced: ``tolaria undo CHAT`` gives it back.

TURN is the turn's number in the chat (1 = the first), as ``tolaria changes CHAT`` lists it.
Exit codes: 0 done, 1 refused for safety (the message names the files and why) or git failed,
2 bad input (no such chat, turn or file; nothing to undo).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from tolaria.chats.checkpoints import TurnChanges, TurnCheckpoints
from tolaria.chats.restore import RestoreInputError, TurnRestore
from tolaria.chats.restore_plan import REVERT, REWIND, YES, RestoreResult
from tolaria.cli.changes_args import EXIT_BAD_INPUT, EXIT_OK, EXIT_REFUSED
from tolaria.cli.storeopen import open_store_or_say
from tolaria.core import checkpoints as ck
from tolaria.core.process.control_client import live_stream_ids
from tolaria.core.store.db import Conversation, Store


def run(args: argparse.Namespace) -> int:
    store = open_store_or_say()
    if isinstance(store, int):
        return store
    try:
        return _run(store, args)
    except RestoreInputError as exc:
        print(f"tolaria: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ck.CheckpointError, OSError) as exc:
        print(f"tolaria: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        store.close()


def _run(store: Store, args: argparse.Namespace) -> int:
    chat = store.get_conversation(args.chat)
    if chat is None:
        print(f"tolaria: no chat {args.chat} (see `tolaria chats`)", file=sys.stderr)
        return EXIT_BAD_INPUT
    service = TurnCheckpoints(store)
    service.recover(chat, live_stream_ids())  # turns of a process that died mid-turn
    turns = store.turns(chat.id)
    turn_id = None
    if getattr(args, "turn", None) is not None:
        if not 1 <= args.turn <= len(turns):
            print(f"tolaria: chat {chat.id} has no turn {args.turn} (it has {len(turns)})",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
        turn_id = turns[args.turn - 1].id
    if args.command == "changes":
        return _changes(service, chat, turn_id, args.json, args.diff)
    restore = TurnRestore(service)
    yes = YES if args.yes else ""
    if args.command == "undo":
        result = restore.undo(chat.id, confirmed=yes)
    elif args.command == "rewind":
        assert turn_id is not None
        result = restore.run(chat.id, turn_id, REWIND, confirmed=yes)
    else:
        assert turn_id is not None
        result = restore.run(chat.id, turn_id, REVERT, list(args.files), confirmed=yes)
    if args.json:
        print(json.dumps(_outcome(result, {t.id: n for n, t in enumerate(turns, 1)}), indent=2,
                         ensure_ascii=False))
        return EXIT_OK if result.done else EXIT_REFUSED
    return _said(result, chat, args.command)


def _outcome(result: RestoreResult, numbers: dict[int, int]) -> dict[str, Any]:
    plan = result.plan
    return {"done": result.done, "files": list(result.files), "kind": plan.kind,
            "turn": numbers.get(plan.turn_id), "blocked": bool(plan.blocked),
            "needs_yes": plan.needs_confirm and not result.done,
            "plan": [{"path": f.path, "action": f.action, "changed_since": f.later or None,
                      "blocked": f.blocker or None} for f in plan.files],
            "left_alone": list(plan.kept), "outside_folder": list(plan.outside),
            "agents_writing": list(plan.writers), "recorded_after_restart": plan.late,
            "message": plan.lines()}


def _said(result: RestoreResult, chat: Conversation, command: str) -> int:
    plan = result.plan
    if result.done:
        if not result.files:
            print("nothing to do: the files are already as they were")
            return EXIT_OK
        lines = plan.lines()
        for line in lines:
            if line.startswith("  "):
                print(line.strip())
        if command != "undo":
            print(f"tolaria: done; `tolaria undo {chat.id}` gives back what was replaced",
                  file=sys.stderr)
        return EXIT_OK
    for line in plan.lines():
        print(line, file=sys.stderr)
    if not plan.blocked:
        print(f"tolaria: nothing was changed; run again with --yes to {command} as said",
              file=sys.stderr)
    return EXIT_REFUSED


def _changes(service: TurnCheckpoints, chat: Conversation, turn_id: int | None, as_json: bool,
             with_diff: bool) -> int:
    turns = service.store.turns(chat.id)
    numbers = {t.id: n for n, t in enumerate(turns, 1)}
    status = {t.id: t.status for t in turns}
    listed = [c for c in service.changes(chat.id) if turn_id is None or c.turn_id == turn_id]
    entries = [_entry(service, chat, c, numbers[c.turn_id], status[c.turn_id], with_diff)
               for c in listed]
    if as_json:
        print(json.dumps(entries, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not entries:
        print("no recorded changes" + (" for that turn" if turn_id is not None else ""))
    for entry in entries:
        _print_entry(entry)
    return EXIT_OK


def _entry(service: TurnCheckpoints, chat: Conversation, change: TurnChanges, number: int,
           status: str, with_diff: bool) -> dict[str, Any]:
    files = []
    for f in change.files:
        item: dict[str, Any] = {"path": f.path, "status": f.status,
                                "reverted": f.path in change.reverted or change.rewound}
        if with_diff:
            try:
                before, after = service.checkpoints_of(chat.id, change.turn_id)
                with service.on_chat(chat.id):  # a folder on a host: git runs there
                    item["diff"] = ck.file_diff(before, after, f.path)
            except (ck.CheckpointError, OSError) as exc:
                item["diff_error"] = str(exc)
        files.append(item)
    return {"turn": number, "turn_id": change.turn_id, "stream_id": change.stream_id,
            "status": status, "files": files, "rewound": change.rewound, "late": change.late,
            "notice": change.notice, "undo": change.undo or None}


def _print_entry(entry: dict[str, Any]) -> None:
    count = len(entry["files"])
    flags = [entry["status"]]
    if entry["rewound"]:
        flags.append("rewound")
    if entry["late"]:
        flags.append("recorded after a restart: may include edits made while Tolaria was closed")
    head = f"turn {entry['turn']}  {count} file{'s' if count != 1 else ''} changed"
    print(f"{head}  ({'; '.join(flags)})")
    if entry["notice"]:
        print(f"  note: {entry['notice']}")
    badge = {"added": "A", "modified": "M", "deleted": "D", "type": "T"}
    for f in entry["files"]:
        print(f"  {badge.get(f['status'], 'M')} {f['path']}{'  (reverted)' if f['reverted'] else ''}")
        if "diff" in f:
            for line in _lines(f["diff"]):
                print(f"      {line}")
        elif "diff_error" in f:
            print(f"      ({f['diff_error']})")
    if entry["undo"]:
        print(f"  undo available: {entry['undo']}")


def _lines(diff: str) -> Sequence[str]:
    return diff.rstrip("\n").splitlines()
