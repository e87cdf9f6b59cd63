"""``tolaria export CHAT`` (a chat as HTML, Markdown or JSON) and ``tolaria desktop
install|uninstall`` (the launcher entry and icon).

Export without ``-o`` writes to stdout; with ``-o FILE`` the file is written atomically (a
temporary file renamed over it once complete: never half a file). The format is ``--format``,
else the file's extension, else HTML. Exit codes: 0 written, 1 the store failed, 2 bad input
(no such chat, a folder or an unwritable path, an unknown format).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
COMMANDS = ("export", "desktop")


def add_parsers(sub: Any) -> None:
    export = sub.add_parser(
        "export", help="write a chat as one HTML file, Markdown or JSON",
        description="Write a stored chat as one self-contained HTML file (tool cards, diffs, "
                    "highlighted code, light and dark), Markdown, or one JSON document for "
                    "scripts (docs/EXPORT.md). Secrets are masked.",
        epilog="exit codes: 0 written, 1 the store failed, 2 bad input")
    export.add_argument("chat", type=int, metavar="CHAT", help="chat id (see 'tolaria chats')")
    export.add_argument("--format", "-f", dest="export_format", choices=("html", "md", "json"),
                        help="default: from -o's extension, else html")
    export.add_argument("-o", "--output", metavar="FILE",
                        help="write here (atomically) instead of stdout")
    desktop = sub.add_parser(
        "desktop", help="add Tolaria to the desktop's launcher (Linux, BSD)",
        description="install: write an XDG .desktop entry and the icon for the current user "
                    "(~/.local/share, or $XDG_DATA_HOME), so the launcher and notifications "
                    "show Tolaria's name and icon. uninstall: remove exactly those files.",
        epilog="exit codes: 0 done, 1 could not write, 2 not supported here")
    desktop.add_argument("desktop_action", metavar="ACTION", choices=("install", "uninstall"),
                         help="install or uninstall")


def run(args: argparse.Namespace) -> int:
    if args.command == "desktop":
        return _desktop(args.desktop_action)
    return _export(args.chat, args.export_format, args.output)


def _export(chat: int, fmt: str | None, output: str | None) -> int:
    import sqlite3

    from tolaria.chats.export import (
        ChatNotFound,
        ExportError,
        export_chat,
        export_to_file,
        format_of,
    )
    from tolaria.cli.storeopen import open_store_or_say

    fmt = fmt or (format_of(output) if output else "html")
    store = open_store_or_say()
    if isinstance(store, int):
        return store
    try:
        if output is None:
            export_chat(store, chat, fmt, sys.stdout)
            sys.stdout.flush()
        else:
            written = export_to_file(store, chat, fmt, Path(output))
            print(f"tolaria: chat {chat} written to {written}", file=sys.stderr)
    except ChatNotFound:
        print(f"tolaria: no chat {chat}; 'tolaria chats' lists them", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ExportError as exc:
        print(f"tolaria: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # ``| head``: the reader has what it wanted
        return EXIT_OK
    except sqlite3.Error as exc:
        print(f"tolaria: cannot read the store: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        store.close()
    return EXIT_OK


def _desktop(action: str) -> int:
    from tolaria.support import desktop

    problem = desktop.unsupported()
    if problem:
        print(f"tolaria: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        outcome = desktop.install() if action == "install" else desktop.uninstall()
    except desktop.DesktopError as exc:
        print(f"tolaria: {exc}", file=sys.stderr)
        return EXIT_FAILED
    verb = "installed" if action == "install" else "removed"
    for path in outcome.changed:
        print(f"{verb} {path}")
    for path in outcome.unchanged:
        print(f"{'unchanged' if action == 'install' else 'left (not written by Tolaria)'} "
              f"{path}")
    if not outcome.changed and not outcome.unchanged:
        print("nothing to remove" if action == "uninstall" else "nothing to do")
    return EXIT_OK
