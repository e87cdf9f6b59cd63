"""``tolaria import``: the CLIs' own stored sessions as chats (tolaria/chats/importing.py)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tolaria.chats.importers import IMPORTERS

if TYPE_CHECKING:
    from tolaria.chats.importing import ImportReport


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    names = ", ".join(IMPORTERS)
    parser = sub.add_parser(
        "import", help="bring the sessions of Claude Code, Codex, Gemini, Qwen and opencode in",
        description="Import the sessions the agent CLIs stored themselves as chats; the next "
                    "turn of such a chat resumes the CLI's own session. Running it again adds "
                    "only what is new. The CLIs' files are only read.")
    parser.add_argument("--from", dest="agents", action="append", metavar="AGENT",
                        choices=list(IMPORTERS), help=f"only this CLI (repeatable): {names}")
    parser.add_argument("--home", type=Path, metavar="DIR",
                        help="the home folder the CLIs wrote to (default: yours)")
    parser.add_argument("--host", metavar="DEST",
                        help="the sessions stored on this host (as ssh takes it, or exec:CMD); "
                             "their chats continue there")
    parser.add_argument("--ssh-config", metavar="FILE", help="with --host: ssh -F FILE")
    parser.add_argument("--dry-run", action="store_true", help="say what would be imported")
    parser.add_argument("--json", action="store_true", help="one JSON report")


def run(args: argparse.Namespace) -> int:
    from tolaria.chats.importing import import_sessions
    from tolaria.chats.saved_runs import open_store

    if args.host:
        return _run_remote(args)
    home = args.home if args.home is not None else Path(os.path.expanduser("~"))
    if not home.is_dir():
        print(f"tolaria import: {home} is not a folder")
        return 2
    store = open_store()
    try:
        report = import_sessions(store, home, args.agents, dry_run=args.dry_run)
    finally:
        store.close()
    return _say(args, report)


def _run_remote(args: argparse.Namespace) -> int:
    """The host's session files, fetched into a private folder, imported, the folder removed."""
    from tolaria.chats.host_import import import_from_host
    from tolaria.chats.saved_runs import open_store
    from tolaria.config.remote_hosts import load_target
    from tolaria.core.remote.hostcall import HostError
    from tolaria.core.remote.hosts import BadDestination

    if args.home is not None:
        print("tolaria import: --home and --host do not go together (the host's own home "
              "folder is read)")
        return 2
    try:
        target = load_target(args.host, ssh_config=args.ssh_config) if args.ssh_config \
            else load_target(args.host)
    except BadDestination as exc:
        print(f"tolaria import: --host: {exc}")
        return 2
    store = open_store()
    try:
        report = import_from_host(store, args.host, target, args.agents, dry_run=args.dry_run)
    except HostError as exc:
        print(f"tolaria import: {exc}")
        return 1
    finally:
        store.close()
    return _say(args, report)


def _say(args: argparse.Namespace, report: ImportReport) -> int:
    if args.json:
        print(json.dumps({
            "imported": [vars(item) for item in report.imported],
            "unchanged": report.unchanged, "bad_lines": report.bad_lines,
            "skipped": [{"path": str(path), "reason": why} for path, why in report.skipped],
        }, ensure_ascii=False))
        return 0
    verb = "would import" if args.dry_run else "imported"
    for item in report.imported:
        label = IMPORTERS[item.agent].label
        where = "" if args.dry_run else f" -> chat {item.conversation_id}"
        counts = f"{item.turns_added} turn{'s' if item.turns_added != 1 else ''}"
        if item.turns_updated:
            counts += f", {item.turns_updated} continued"
        if item.turns_unfinished:
            counts += f", {item.turns_unfinished} interrupted (no answer in the session yet)"
        print(f"{verb} {label} session {item.session_id[:12]}: {item.title!r} "
              f"({counts}){where}")
    for path, why in report.skipped:
        print(f"skipped {path}: {why}")
    summary = f"{len(report.imported)} session(s) {verb}, {report.unchanged} already here"
    if report.skipped:
        summary += f", {len(report.skipped)} file(s) skipped"
    if report.bad_lines:
        summary += f", {report.bad_lines} unreadable line(s) left out"
    print(summary)
    return 0
