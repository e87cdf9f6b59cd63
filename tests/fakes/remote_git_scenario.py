"""Checkpoints, review, revert and rewind of a folder on a host, as whoever runs this (the
non-root local side of tests/remote/test_remote_checkpoints.py): ``python remote_git_scenario.py
JSON``. JSON: ``host``, ``ssh_config``, ``repo`` (the git folder on the host), ``stream_id``,
``home`` (the home folder there), ``plain`` (a folder there outside git).

A real turn: an agent process started on the host through the supervisor changes a line of
``notes.txt`` and creates ``new.txt``; the snapshots before and after are taken on the host.
Then "the user" edits ``notes.txt`` on the host (through ssh, not through Tolaria), and the
scenario asks for revert and rewind, then Undo and a hunk revert. Prints one JSON line with what
it saw.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

AGENT = r"""
import json, sys
with open("notes.txt") as fh:
    text = fh.read()
with open("notes.txt", "w") as fh:
    fh.write(text.replace("two", "TWO by the agent"))
with open("new.txt", "w") as fh:
    fh.write("made by the agent\n")
print(json.dumps({"type": "system", "subtype": "init", "session_id": "s1", "cwd": "."}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": "edited", "session_id": "s1"}))
"""


def host_sh(target: Any, script: str) -> str:
    """A shell command run on the host as its user would (not through Tolaria's git runner)."""
    from tolaria.core.remote.hostcall import run_remote

    return run_remote(target, ["sh", "-c", script], timeout=30).decode()


async def agent_turn(target: Any, repo: str, stream_id: str) -> str:
    from tolaria.core.adapters.manifest import Manifest
    from tolaria.core.events import Done
    from tolaria.core.process.registry import ProcessRegistry
    from tolaria.core.turns.runner import RunRequest, stream_ai_agent

    manifest = Manifest(id="scenario", name="remote editor", protocol="claude-stream-json",
                        command=("python3", "-c", AGENT, "{prompt}"))
    events: list[Any] = []
    done = await asyncio.wait_for(stream_ai_agent(
        RunRequest(manifest, "edit", repo, {}, target=target), stream_id, events.append,
        registry=ProcessRegistry(), grace_s=0.5), 60)
    assert isinstance(done, Done)
    return done.stop_reason


def scenario(cfg: dict[str, Any]) -> dict[str, Any]:
    from tolaria.chats.checkpoints import TurnCheckpoints
    from tolaria.chats.restore import TurnRestore
    from tolaria.chats.restore_plan import REVERT, REWIND
    from tolaria.chats.review import ReviewRequest, TurnReview, hunk_key
    from tolaria.config.remote_hosts import load_target
    from tolaria.config.settings import settings_path
    from tolaria.core.store.db import Store
    from tolaria.support import paths

    settings = settings_path()
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(f"[remote]\nssh_config = {json.dumps(cfg['ssh_config'])}\n")
    host, repo = cfg["host"], cfg["repo"]
    target = load_target(host)
    out: dict[str, Any] = {}
    store = Store(paths.data_dir() / "scenario.db")
    service = TurnCheckpoints(store)
    restore = TurnRestore(service, writers=lambda _repo: [])
    review = TurnReview(service, restore)
    chat = store.create_conversation("remote", "demo", repo, host=host)
    turn_id = store.start_turn(chat.id, cfg["stream_id"], "demo", "edit").id
    service.take_before(chat, turn_id, repo)
    out["agent"] = asyncio.run(agent_turn(target, repo, cfg["stream_id"]))
    changes = service.record_after(chat, turn_id)
    out["files"] = sorted([f.path, f.status] for f in changes.files) if changes else None
    out["notices"] = [c.notice for c in service.changes(chat.id) if c.notice]
    shown = review.handle_now(chat.id, ReviewRequest(turn_id, "notes.txt"))
    out["diff"] = "".join(h.header + h.body for h in shown.hunks)
    out["review_error"] = shown.error
    # The user edits notes.txt on the host after the turn, outside Tolaria.
    host_sh(target, f"cd {json.dumps(repo)} && printf 'user line\\n' >> notes.txt")
    user_notes = host_sh(target, f"cat {json.dumps(repo)}/notes.txt")
    asked = restore.run(chat.id, turn_id, REVERT, ["notes.txt"])
    out["revert_asked"] = {"done": asked.done, "needs_confirm": asked.plan.needs_confirm,
                           "files": [[f.path, f.action, f.later] for f in asked.plan.files]}
    rewind = restore.run(chat.id, turn_id, REWIND)
    out["rewind_asked"] = {"done": rewind.done, "needs_confirm": rewind.plan.needs_confirm,
                           "files": [[f.path, f.action, f.later] for f in rewind.plan.files]}
    out["notes_untouched"] = host_sh(target, f"cat {json.dumps(repo)}/notes.txt") == user_notes
    out["new_still_there"] = host_sh(
        target, f"test -f {json.dumps(repo)}/new.txt && echo yes || echo no").strip()
    # A file the user did not touch reverts at once (new.txt: made by the turn: deleted).
    plain = restore.run(chat.id, turn_id, REVERT, ["new.txt"])
    out["new_reverted"] = plain.done
    out["new_after_revert"] = host_sh(
        target, f"test -e {json.dumps(repo)}/new.txt && echo yes || echo no").strip()
    # With the yes: the agent's line goes, the user's stays.
    yes = restore.run(chat.id, turn_id, REVERT, ["notes.txt"], confirmed=asked.plan.fingerprint)
    out["merged_done"] = yes.done
    out["notes_after_yes"] = host_sh(target, f"cat {json.dumps(repo)}/notes.txt")
    # Undo gives back exactly what the revert replaced.
    undone = restore.undo(chat.id, turn_id, confirmed="")
    out["undo_done"] = undone.done
    out["notes_after_undo"] = host_sh(target, f"cat {json.dumps(repo)}/notes.txt")
    out["user_notes"] = user_notes
    # One hunk of the turn's diff reverted there (git apply in the store, on the work tree):
    # the user's later line stays.
    (hunk,) = shown.hunks
    hunked = review.handle_now(chat.id, ReviewRequest(turn_id, "notes.txt", action="revert",
                                                      hunk=hunk_key(hunk)))
    out["hunk_error"] = hunked.error
    out["hunk_reverted"] = sorted(hunked.reverted)
    out["notes_after_hunk"] = host_sh(target, f"cat {json.dumps(repo)}/notes.txt")
    # The host's home folder is too wide to snapshot; a folder outside git gets its notice.
    for name, folder in (("home", cfg["home"]), ("empty", ""), ("plain", cfg["plain"])):
        other = store.create_conversation(name, "demo", folder or None, host=host)
        other_turn = store.start_turn(other.id, f"{cfg['stream_id']}{name}", "demo", "x").id
        service.take_before(other, other_turn, folder)
        out[f"notice_{name}"] = [c.notice for c in service.changes(other.id)]
    out["local_store_refs"] = sorted(p.name for p in (paths.data_dir() / "checkpoints").glob(
        "**/*") if p.is_file()) if (paths.data_dir() / "checkpoints").exists() else []
    return out


def main() -> int:
    arg = sys.argv[1]
    cfg = json.loads(Path(arg[1:]).read_text() if arg.startswith("@") else arg)
    print(json.dumps(scenario(cfg)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
