"""The ``tolaria`` command: no subcommand opens the window; subcommands run headless.

Exit codes of ``tolaria run``: 0 end_turn, 130 cancelled, 1 agent error (or the turn could not
be saved: disk full), 2 bad input, 141 its stdout was closed (the run is stopped).
``tolaria run`` keeps its turn in the window's store (a new chat, or ``--chat ID``); see
tolaria/chats/saved_runs.py. ``tolaria chats`` lists the stored chats.
``tolaria abort``: 0 stopped, 1 nothing running under that id, 2 invalid id.
``tolaria models`` and ``tolaria key``: 0 done, 1 endpoint or keyring failure, 2 bad input.
``tolaria changes/revert/rewind/undo`` (tolaria/cli/changes.py): 0 done, 1 refused for safety,
2 bad input.
"""

from __future__ import annotations

# Only what every subcommand needs is imported here: ``tolaria abort`` and ``tolaria streams``
# must start fast (their start-up is part of a stop's latency), so each subcommand imports its
# own modules (tests/cli/test_fast_commands.py checks the import set).
import sys

from tolaria import __version__
from tolaria.cli.exits import (  # noqa: F401 (exit codes: main's API too)
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_CANCELLED,
    EXIT_ERROR,
    EXIT_OK,
    catch_early_signals,
)

TYPE_CHECKING = False  # not typing's: importing typing costs ``tolaria abort`` ~3 ms
if TYPE_CHECKING:
    import argparse
    from typing import Any

_EXAMPLES = """\
examples:
  tolaria                                    open the window
  tolaria run --agent demo "list the files"  one turn headless, saved as a new chat
  tolaria run --chat 3 "and now the tests"   continue chat 3 with its agent
  tolaria run --json --agent claude "..."    one JSON event per line
  tolaria streams                            live runs of every Tolaria process
  tolaria abort ai-agent-stream-...          stop one of them (its whole process tree)
  tolaria changes 3 --diff                   what chat 3's turns changed in its git folder
  tolaria revert 3 2 a.txt                   put a.txt back as before turn 2 (asks: --yes)
  tolaria undo 3                             take the last revert or rewind back
  tolaria export 3 -o chat.html              chat 3 as one HTML file (or --format md|json)
  tolaria usage --by day --since 7d          tokens, cost and agent time of the last 7 days
  tolaria desktop install                    add Tolaria to the launcher (Linux, BSD)

exit codes of run: 0 done, 1 agent error, 2 bad input, 130 cancelled, 141 output closed
"""


def _parser() -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(
        prog="tolaria", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EXAMPLES,
        description="Tolaria: a chat window for AI coding-agent CLIs where Stop stops the\n"
                    "whole process tree. Without a command it opens the window.")
    p.add_argument("--version", action="version", version=f"tolaria {__version__}")
    p.add_argument("--agent", metavar="AGENT", help="agent to preselect in the window")
    p.add_argument("--cwd", metavar="DIR", help="working folder to preselect in the window")
    sub = p.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    run = sub.add_parser(
        "run", help="run one agent turn headless and stream it",
        description="Run one agent turn without the window. On a terminal: colour, a spinner, "
                    "tool lines and the stop reason; piped: the answer as plain text on stdout, "
                    "the rest on stderr. Ctrl+C stops the run and its whole process tree.",
        epilog="exit codes: 0 done, 1 agent error, 2 bad input, 130 cancelled, "
               "141 stdout closed (the run is stopped)")
    run.add_argument("--agent", dest="run_agent", metavar="AGENT",
                     help="adapter id (see 'tolaria agents'); with --chat, default: the chat's")
    run.add_argument("--cwd", dest="run_cwd", metavar="DIR", help="working folder of the agent")
    run.add_argument("--stream-id", metavar="ID", help="use this stream id instead of a new one")
    run.add_argument("--json", action="store_true", help="one JSON event per line on stdout")
    run.add_argument("--grace", type=float, default=None, metavar="SECONDS",
                     help="seconds between SIGTERM and SIGKILL when stopping (default: "
                          "grace_seconds in settings.toml [behaviour], else 2)")
    run.add_argument("--attach", action="append", default=[], metavar="FILE",
                     help="send this file (an image or any file) with the prompt, in the "
                          "agent's own form; repeatable")
    run.add_argument("--host", metavar="DEST",
                     help="run the agent on another machine: an ssh alias, user@host, "
                          "ssh://user@host:port, a [hosts.\"NAME\"] of the settings, or "
                          "exec:PREFIX (e.g. exec:docker exec -i box)")
    run.add_argument("--ssh-config", metavar="FILE", help="with --host: ssh -F FILE")
    run.add_argument("--keep-running", action="store_true",
                     help="with --host: keep the run going there when the connection drops "
                          "(or this process dies); Tolaria reattaches and replays its output "
                          "(kept with the chat)")
    run.add_argument("prompt", metavar="PROMPT", help="what to ask (one argument: quote it)")
    limits = run.add_argument_group(
        "limits", "stop the run (exit 130, the limit named in its done event) when it reaches "
                  "one; default: [limits] in settings.toml, then the chat's own; 0 = none")
    limits.add_argument("--max-time", metavar="SECONDS", help="wall time (decimals allowed)")
    limits.add_argument("--max-cost", metavar="USD",
                        help="cost in US dollars, where the agent reports it")
    limits.add_argument("--max-tokens", metavar="N", help="tokens (input + output)")
    limits.add_argument("--max-tool-calls", metavar="N", help="tool calls")
    saving = run.add_mutually_exclusive_group()
    saving.add_argument("--chat", type=int, metavar="ID",
                        help="add this turn to a stored chat (see 'tolaria chats'); default: a "
                             "new chat titled from the prompt")
    saving.add_argument("--no-save", action="store_true",
                        help="do not keep the turn in the store (nothing to recover or reopen)")
    chats = sub.add_parser("chats", help="list the stored chats (the window's sidebar)",
                           description="List the stored chats, newest activity first.")
    chats.add_argument("--json", action="store_true", help="as JSON")
    chats.add_argument("--delete", type=int, metavar="ID", dest="delete_chat",
                       help="delete chat ID and its checkpoints (asks unless --yes)")
    chats.add_argument("--yes", action="store_true", help="with --delete: do not ask")
    ckpts = sub.add_parser("checkpoints", help="the disk space of the turns' checkpoints, and "
                           "pruning them", description="List, per repository, what Tolaria's "
                           "checkpoints take on disk; --prune removes those of deleted chats "
                           "(and with --older-than those of older turns, which asks --yes).")
    ckpts.add_argument("--json", action="store_true", help="as JSON")
    ckpts.add_argument("--prune", action="store_true",
                       help="remove the checkpoints of deleted chats")
    ckpts.add_argument("--older-than", type=float, metavar="DAYS",
                       help="with --prune: also those of turns older than DAYS days")
    ckpts.add_argument("--yes", action="store_true",
                       help="go ahead when turns still shown would lose Revert/Rewind")
    agents = sub.add_parser("agents", help="list the agents with their program and version",
                            description="List the adapters, where their program was found "
                                        "and its version.")
    agents.add_argument("--json", action="store_true", help="as JSON")
    agents.add_argument("--host", metavar="DEST",
                        help="the agents of another machine (as --host of 'run'), found there "
                             "through its login shell; one ssh connection")
    agents.add_argument("--ssh-config", metavar="FILE", help="with --host: ssh -F FILE")
    streams = sub.add_parser("streams", help="list the live runs of every Tolaria process",
                             description="List the runs streaming now, in the window or in "
                                         "'tolaria run': stream id, agent, chat, elapsed time "
                                         "and the Tolaria process that owns it.")
    streams.add_argument("--json", action="store_true", help="as JSON")
    abort = sub.add_parser("abort", help="stop a run owned by any Tolaria process",
                           description="Stop a run and its whole process tree; answers once "
                                       "it is gone. Prints true (exit 0) or false (exit 1: "
                                       "nothing runs under that id; exit 2: invalid id).")
    abort.add_argument("stream_id", metavar="STREAM_ID", help="as listed by 'tolaria streams'")
    models = sub.add_parser("models", help="list the models a model endpoint offers",
                            description="List the models an openai-chat endpoint offers "
                                        "(GET /models).")
    models.add_argument("models_agent", metavar="AGENT", help="an openai-chat adapter id")
    models.add_argument("--json", action="store_true", help="as JSON")
    models.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="seconds to wait for the endpoint (default 10)")
    from tolaria.cli import changes_args, export_cmd, usage_cmd
    from tolaria.cli import importing as cli_import

    changes_args.add_parsers(sub)
    cli_import.add_parser(sub)
    export_cmd.add_parsers(sub)
    usage_cmd.add_parser(sub)
    key = sub.add_parser("key", help="store or delete a model endpoint's API key",
                         description="Store or delete a model endpoint's API key in the system "
                                     "keyring. The key is read from a hidden prompt, or from "
                                     "stdin when piped; never from the command line.")
    key.add_argument("key_action", metavar="ACTION", choices=("set", "delete"),
                     help="set or delete")
    key.add_argument("key_agent", metavar="AGENT", help="an openai-chat adapter id")
    return p


def _fast(argv: list[str]) -> int | None:
    """``tolaria abort ID`` and ``tolaria streams [--json]`` without argparse: building the
    parser (argparse, gettext, shutil for the terminal width) costs as much again as the whole
    command. Anything else (``--help``, a typo) goes through the parser as usual."""
    if len(argv) == 2 and argv[0] == "abort" and not argv[1].startswith("-"):
        command = "abort"
    elif argv in (["streams"], ["streams", "--json"]):
        command = "streams"
    else:
        return None
    from tolaria.cli import streams

    _install_crash_hook_lazily()
    if command == "abort":
        return streams.cmd_abort(argv[1])
    return streams.cmd_streams(as_json=len(argv) == 2)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "run" in argv:
        # First of all, before any heavy import: a ``run --stream-id ID`` listens on its
        # control socket now, so an abort sent while it starts waits there and is not lost;
        # a Ctrl+C or SIGTERM while it starts is kept too (catch_early_signals).
        from tolaria.core.process import claim

        if claim.run_args(argv) is not None:
            catch_early_signals()  # first: once the claim is visible, a signal is kept
            claim.claim_run(argv)
    try:
        fast = _fast(argv)
        if fast is not None:
            return fast
        return _main(_parser().parse_args(argv))
    except OSError as exc:  # a read-only home, a socket folder of another user: not a bug
        from tolaria.support.paths import access_problem

        problem = access_problem(exc)
        if problem is None:
            raise
        print(f"tolaria: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        if "run" in argv:  # the run ended before it listened (bad input): nobody waits
            from tolaria.core.process import claim

            claim.release()


def _main(args: argparse.Namespace) -> int:
    # Whatever an agent wrote (lone surrogates included) must never make a print raise.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    if args.command in ("streams", "abort"):
        from tolaria.cli import streams

        _install_crash_hook_lazily()
        if args.command == "streams":
            return streams.cmd_streams(args.json)
        return streams.cmd_abort(args.stream_id)
    if args.command is not None:  # the window installs its own hooks (tolaria.app.main.run)
        from tolaria.support import crash

        crash.install("cli")
    if args.command == "run":
        from tolaria.cli.run_cmd import cmd_run

        return cmd_run(args)
    if args.command == "chats":
        if args.delete_chat is not None:
            from tolaria.cli.checkpoints_cmd import cmd_delete_chat

            return cmd_delete_chat(args.delete_chat, args.yes)
        return _cmd_chats(args.json)
    if args.command == "checkpoints":
        from tolaria.cli.checkpoints_cmd import cmd_checkpoints

        return cmd_checkpoints(args.json, args.prune, args.older_than, args.yes)
    if args.command == "agents":
        import asyncio

        if args.host:
            from tolaria.cli.host_agents import cmd_host_agents

            return asyncio.run(cmd_host_agents(args.host, args.ssh_config, args.json))
        return asyncio.run(_cmd_agents(args.json))
    if args.command == "models":
        from tolaria.cli.models import cmd_models

        return cmd_models(args.models_agent, args.json, args.timeout)
    if args.command in ("changes", "revert", "rewind", "undo"):  # changes_args.COMMANDS
        from tolaria.cli import changes as cli_changes

        return cli_changes.run(args)
    if args.command == "import":
        from tolaria.cli import importing as cli_import

        return cli_import.run(args)
    if args.command in ("export", "desktop"):
        from tolaria.cli import export_cmd

        return export_cmd.run(args)
    if args.command == "usage":
        from tolaria.cli import usage_cmd

        return usage_cmd.run(args)
    if args.command == "key":
        from tolaria.cli.models import cmd_key

        return cmd_key(args.key_action, args.key_agent)
    return _open_window(args)


def _install_crash_hook_lazily() -> None:
    """The crash-report hook, paid for only if something does go wrong: importing
    tolaria.support.crash costs more than the whole of ``tolaria abort``."""
    previous = sys.excepthook

    def hook(*exc_info: Any) -> None:
        from tolaria.support import crash

        sys.excepthook = previous  # crash.install chains to the hook it finds
        crash.install("cli")
        sys.excepthook(*exc_info)

    sys.excepthook = hook


def _open_window(args: argparse.Namespace) -> int:
    # Imported here: the headless subcommands must not pay for (or need) Qt.
    from tolaria.app.main import run

    return run(agent=args.agent, cwd=args.cwd)


def _cmd_chats(as_json: bool) -> int:
    import dataclasses
    import json

    from tolaria.chats.saved_runs import list_chats
    from tolaria.cli.storeopen import open_store_or_say

    store = open_store_or_say()
    if isinstance(store, int):
        return store
    try:
        chats = list_chats(store)
    finally:
        store.close()
    if as_json:
        print(json.dumps([dataclasses.asdict(c) for c in chats], indent=2, ensure_ascii=False))
        return EXIT_OK
    for c in chats:
        print(c.line())
    if not chats:
        print("no chats")
    return EXIT_OK


async def _cmd_agents(as_json: bool) -> int:
    import json

    from tolaria.core.adapters.manifest import load_adapters
    from tolaria.core.programs import discovery

    adapters = load_adapters()
    found = await discovery.detect_all(list(adapters.manifests.values()))
    errors = [{"file": str(e.path), "key": e.key, "reason": e.reason} for e in adapters.errors]
    if as_json:
        print(json.dumps({"agents": [d.__dict__ for d in found], "errors": errors}, indent=2))
        return EXIT_OK
    for d in found:
        state = d.version or ("available" if d.path and not d.error else "")
        where = f"  [{d.source}]" if d.source else ""
        print(f"{d.agent:<12} {d.name:<28} {state}  {d.path or ''}{where}")
        if d.native:
            print(f"{'':<12}   native binary of the wrapper {d.found_at}")
        if d.error:
            print(f"{'':<12} ! {d.error}")
    for e in adapters.errors:
        print(f"broken manifest: {e}")
    return EXIT_OK
