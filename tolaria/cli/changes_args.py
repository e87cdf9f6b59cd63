"""The argument parsers of ``tolaria changes / revert / rewind / undo`` (tolaria/cli/changes.py
does the work): building ``tolaria``'s parser imports this, not the checkpoint machinery."""

from __future__ import annotations

from typing import Any

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT = 0, 1, 2
COMMANDS = ("changes", "revert", "rewind", "undo")
_CODES = "exit codes: 0 done, 1 refused for safety (the files and why are said), 2 bad input"


def add_parsers(sub: Any) -> None:
    """The four subcommands, on ``tolaria``'s subparsers."""
    changes = sub.add_parser(
        "changes", help="what a chat's turns changed in its git folder",
        description="List the files each turn of a chat changed (added, modified, deleted), "
                    "what was reverted or rewound, and what Undo would take back.",
        epilog="exit codes: 0 done, 2 bad input")
    changes.add_argument("chat", type=int, metavar="CHAT", help="chat id (see 'tolaria chats')")
    changes.add_argument("turn", type=int, nargs="?", metavar="TURN",
                         help="only this turn (its number in the chat, 1 = the first)")
    changes.add_argument("--json", action="store_true", help="as JSON")
    changes.add_argument("--diff", action="store_true", help="with each file's diff")
    revert = sub.add_parser(
        "revert", help="put files a turn changed back as they were before it",
        description="Put the turn's files (or only FILE...) back as they were before it. A "
                    "file edited since is said: with --yes only the turn's lines are taken out "
                    "when they can be, else the later edits go too (undo brings them back).",
        epilog=_CODES)
    revert.add_argument("chat", type=int, metavar="CHAT", help="chat id (see 'tolaria chats')")
    revert.add_argument("turn", type=int, metavar="TURN", help="the turn's number in the chat")
    revert.add_argument("files", nargs="*", metavar="FILE", help="paths as 'changes' lists them")
    revert.add_argument("--yes", action="store_true", help="go ahead with what the plan says")
    revert.add_argument("--json", action="store_true", help="the outcome and the plan as JSON")
    rewind = sub.add_parser(
        "rewind", help="put the chat's folder back as it was before a turn",
        description="Undo what that turn and every later one changed in the chat's folder. "
                    "Files no turn touched (your new files) are left alone. Always asks: "
                    "without --yes it prints what it would do.", epilog=_CODES)
    rewind.add_argument("chat", type=int, metavar="CHAT", help="chat id (see 'tolaria chats')")
    rewind.add_argument("turn", type=int, metavar="TURN", help="the turn's number in the chat")
    rewind.add_argument("--yes", action="store_true", help="go ahead with what the plan says")
    rewind.add_argument("--json", action="store_true", help="the outcome and the plan as JSON")
    undo = sub.add_parser(
        "undo", help="take back the chat's last revert or rewind",
        description="Give back the exact files the chat's last revert or rewind replaced. A "
                    "file changed since that revert needs --yes.", epilog=_CODES)
    undo.add_argument("chat", type=int, metavar="CHAT", help="chat id (see 'tolaria chats')")
    undo.add_argument("--yes", action="store_true", help="go ahead with what the plan says")
    undo.add_argument("--json", action="store_true", help="the outcome and the plan as JSON")
