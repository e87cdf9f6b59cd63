"""``tolaria usage``: tokens, cost and agent time per chat, day or agent, from the store.

Exit codes: 0 printed, 1 the store failed, 2 bad input (a ``--since`` that is not a date).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
COMMANDS = ("usage",)


def add_parser(sub: Any) -> None:
    usage = sub.add_parser(
        "usage", help="tokens, cost and agent time per chat, day or agent",
        description="Totals of the stored turns: tokens in and out (and cache, where the "
                    "agent reports it), cost (where the agent reports it: '—' otherwise) and "
                    "agent time (the wall time of the runs), grouped per chat, day or agent; "
                    "then the plans' rate limits as each CLI last reported them.",
        epilog="exit codes: 0 printed, 1 the store failed, 2 bad input")
    usage.add_argument("--by", choices=("chat", "day", "agent"), default="agent",
                       help="group per chat, per day or per agent (default)")
    usage.add_argument("--since", metavar="DATE",
                       help="only turns started on or after DATE (YYYY-MM-DD, 'today', or 7d "
                            "for the last 7 days)")
    usage.add_argument("--json", action="store_true", help="as one JSON document")


def run(args: argparse.Namespace) -> int:
    import sqlite3

    from tolaria.chats.usage import BadPeriod, report, since_of
    from tolaria.cli.storeopen import open_store_or_say

    try:
        since = since_of(args.since) if args.since else None
    except BadPeriod as exc:
        print(f"tolaria: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    store = open_store_or_say()
    if isinstance(store, int):
        return store
    try:
        usage = report(store, args.by, since)
    except sqlite3.Error as exc:
        print(f"tolaria: cannot read the store: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        store.close()
    try:
        if args.json:
            json.dump(_document(usage), sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            sys.stdout.write(_table(usage))
        sys.stdout.flush()
    except BrokenPipeError:  # ``| head``: the reader has what it wanted
        return EXIT_OK
    return EXIT_OK


def _document(usage: Any) -> dict[str, Any]:
    since = (datetime.datetime.fromtimestamp(usage.since).date().isoformat()
             if usage.since is not None else None)
    return {
        "by": usage.by, "since": since,
        "rows": [row.to_dict() for row in usage.rows],
        "total": usage.total.to_dict(),
        "rate_limits": {agent: {"windows": state.rate_limits, "reported_at": state.at}
                        for agent, state in sorted(usage.rate_limits.items())},
    }


_HEAD = ("turns", "in", "out", "cache read", "cache write", "cost", "agent time")


def _table(usage: Any) -> str:
    from tolaria.chats.usage import agent_time, cost, tokens
    from tolaria.core.ratelimits import describe

    def cells(row: Any) -> list[str]:
        return [str(row.turns), tokens(row.input_tokens), tokens(row.output_tokens),
                tokens(row.cache_read_tokens), tokens(row.cache_write_tokens),
                cost(row.cost_usd), agent_time(row.agent_ms)]

    names = {"chat": "chat", "day": "day", "agent": "agent"}
    lines = [[names[usage.by], *_HEAD]]
    for row in usage.rows:
        label = row.label if usage.by != "chat" else f"{row.key} {row.label}"
        lines.append([_clip(label), *cells(row)])
    lines.append(["total", *cells(usage.total)])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for index, line in enumerate(lines):
        if index == len(lines) - 1:
            out.append("  ".join("-" * w for w in widths))
        out.append("  ".join([line[0].ljust(widths[0])]
                             + [cell.rjust(w) for cell, w in zip(line[1:], widths[1:],
                                                                  strict=True)]).rstrip())
    if not usage.rows:
        out.insert(1, "(no turns" + (" in this period)" if usage.since else ")"))
    for agent, state in sorted(usage.rate_limits.items()):
        when = datetime.datetime.fromtimestamp(state.at).strftime("%Y-%m-%d %H:%M")
        for window in state.rate_limits or []:
            out.append(f"{agent}: {describe(window)} (reported {when})")
    return "\n".join(out) + "\n"


def _clip(text: str, width: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
