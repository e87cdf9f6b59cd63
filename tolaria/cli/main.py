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

TYPE_CHECKING = False  # not typing's: importing typing costs ``tolaria abort`` ~3 ms
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

    from tolaria.chats.saved_runs import SavedRun
    from tolaria.cli.printer import Printer
    from tolaria.core.adapters.manifest import AdapterSet
    from tolaria.core.events import Done, Event
    from tolaria.core.limits import RunLimits
    from tolaria.core.turns.runner import RunRequest

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_CANCELLED = 0, 1, 2, 130
#: ``tolaria run``'s reader went away (``| head -1``): the run was stopped. 128 + SIGPIPE, as a
#: shell reports a program killed by the broken pipe.
EXIT_BROKEN_PIPE = 141

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
    from tolaria.cli import changes as cli_changes
    from tolaria.cli import export_cmd, usage_cmd
    from tolaria.cli import importing as cli_import

    cli_changes.add_parsers(sub)
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
        # a Ctrl+C or SIGTERM while it starts is kept too (_catch_early_signals).
        from tolaria.core.process import claim

        if claim.run_args(argv) is not None:
            _catch_early_signals()  # first: once the claim is visible, a signal is kept
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
        return _cmd_run(args)
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

        return asyncio.run(_cmd_agents(args.json))
    if args.command == "models":
        from tolaria.cli.models import cmd_models

        return cmd_models(args.models_agent, args.json, args.timeout)
    if args.command in ("changes", "revert", "rewind", "undo"):
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


#: SIGINT/SIGTERM/SIGHUP received while ``tolaria run`` started, before it had a run to stop:
#: the run stops as soon as it is reserved (it ends cancelled, nothing spawned).
_early_signals: list[int] = []


def _catch_early_signals() -> None:
    """Keep a stop signal that comes before the run is reserved instead of dying half-way
    (a KeyboardInterrupt traceback, a turn left "running" in the store). A second one acts as
    if no handler were there, so a start-up that hangs can still be interrupted. Installed
    before the claim: once another terminal can name the run, its signals are kept too."""
    if sys.platform == "win32":  # runs are refused there (ADR 0014), and it has no SIGHUP
        return
    import signal

    def early(signum: int, _frame: object) -> None:
        if _early_signals:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
        _early_signals.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, early)


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


def _report_manifest_errors(adapters: AdapterSet) -> None:
    for err in adapters.errors:
        print(f"tolaria: broken adapter manifest: {err}", file=sys.stderr)


def _cmd_run(args: argparse.Namespace) -> int:
    import logging
    import sqlite3

    from tolaria.chats.saved_runs import ChatError, SavedRun
    from tolaria.core.adapters.manifest import load_adapters
    from tolaria.support.paths import access_problem
    from tolaria.support.platforms import run_refusal

    refusal = run_refusal()  # Windows: no Stop as strong as elsewhere yet (ADR 0014)
    if refusal is not None:
        print(f"tolaria: {refusal}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not args.prompt.strip():
        print("tolaria: the prompt is empty; say what the agent should do, e.g. "
              "tolaria run --agent demo \"list the files\"", file=sys.stderr)
        return EXIT_BAD_INPUT
    flags = _limit_flags(args)
    if isinstance(flags, str):  # before anything is saved
        print(f"tolaria: {flags}", file=sys.stderr)
        return EXIT_BAD_INPUT
    args.limit_flags = flags
    adapters = load_adapters()
    _report_manifest_errors(adapters)
    try:
        saved = None if args.no_save else SavedRun.open(args.chat)
    except (ChatError, OSError, sqlite3.Error, RuntimeError) as exc:  # RuntimeError: schema
        problem = access_problem(exc)
        print(f"tolaria: {problem or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT if isinstance(exc, ChatError) or problem else EXIT_ERROR
    if saved is None:
        return _run_turn(args, adapters, saved)
    # A failed save is reported here, once, after the run's output (not at every retry).
    logging.getLogger("tolaria.core.store").setLevel(logging.ERROR)
    code = EXIT_ERROR
    try:
        code = _run_turn(args, adapters, saved)
    finally:
        saved.close()
        if saved.store.write_error is not None:
            print(f"tolaria: {saved.store.write_error}", file=sys.stderr)
        elif saved.chat_id is not None and saved.stream_id is not None:
            print(f"tolaria: saved in chat {saved.chat_id} (continue it with --chat "
                  f"{saved.chat_id})", file=sys.stderr)
    return EXIT_ERROR if saved.store.write_error is not None and code == EXIT_OK else code


def _run_turn(args: argparse.Namespace, adapters: AdapterSet, saved: SavedRun | None) -> int:
    import asyncio
    import dataclasses

    from tolaria.chats.run_config import prepare_run
    from tolaria.cli.attach_opts import attach_files
    from tolaria.cli.tty import make_printer
    from tolaria.config.overrides import AgentSettingsError
    from tolaria.core.events import STOP_CANCELLED, STOP_END_TURN
    from tolaria.core.stream_id import InvalidStreamId, new_stream_id, validate_stream_id
    from tolaria.support import crash

    for known in adapters.manifests.values():  # kept out of crash reports
        crash.remember_secrets(known.env)
    if args.run_agent is None:
        if saved is None or saved.agent is None:
            print("tolaria: run needs --agent (or --chat ID to continue a chat with its agent)",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
        args.run_agent = saved.agent
    try:
        manifest = adapters.get(args.run_agent)
    except KeyError as exc:
        print(f"tolaria: {exc.args[0]}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        stream_id = validate_stream_id(args.stream_id) if args.stream_id else new_stream_id()
    except InvalidStreamId as exc:
        print(f"tolaria: invalid --stream-id: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # The same settings files as the window: the agent's overrides and the behaviour settings.
    try:
        prepared = prepare_run(manifest)
    except AgentSettingsError as exc:
        print(f"tolaria: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for warning in prepared.warnings:
        print(f"tolaria: settings: {warning}", file=sys.stderr)
    request = prepared.request(args.prompt, cwd=args.run_cwd)
    if args.host is not None:  # another machine (tolaria/cli/remote_run.py)
        from tolaria.cli.remote_run import with_host

        on_host = with_host(request, args.host, args.ssh_config)
        if isinstance(on_host, str):
            print(f"tolaria: --host: {on_host}", file=sys.stderr)
            return EXIT_BAD_INPUT
        request = on_host
        if args.attach:  # the stored copies are on this machine, the agent is not
            print("tolaria: --attach does not work with --host yet: the agent on "
                  f"{args.host} cannot read this machine's files", file=sys.stderr)
            return EXIT_BAD_INPUT
    attached = attach_files(args.attach, manifest, saved.store if saved else None,
                            saved.chat_id if saved else None)
    if isinstance(attached, str):  # before anything is saved or started (ADR 0028)
        print(f"tolaria: {attached}", file=sys.stderr)
        return EXIT_BAD_INPUT
    request = dataclasses.replace(request, attachments=attached)
    if saved is not None:  # the turn goes into the store first (history, resume, chat folder)
        try:
            request = saved.begin(request, stream_id, explicit_cwd=args.run_cwd)
        except ValueError as exc:
            print(f"tolaria: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    grace = prepared.grace_s if args.grace is None else args.grace
    flags = args.limit_flags
    printer = make_printer(args.json)
    output = _RunOutput(printer, printer,
                        saved.conversation.title if saved and saved.conversation else None)
    done = asyncio.run(_run_with_control(request, stream_id, output, grace, saved,
                                         limits=(flags, prepared.limits)))
    if printer.output.closed:  # the reader went away: the run was stopped for that
        return EXIT_BROKEN_PIPE
    if done.stop_reason == STOP_END_TURN:
        return EXIT_OK
    if done.stop_reason == STOP_CANCELLED:
        return EXIT_CANCELLED
    return EXIT_ERROR


class _RunOutput:
    """Where a run's events go (``on_event``: the printer; the engine's gate stores each one
    first), with the printer itself (to wire its spinner and closed-pipe stop) and the chat's
    title (listed by ``tolaria streams``)."""

    def __init__(self, on_event: Callable[[Event], None], printer: Printer,
                 chat: str | None) -> None:
        self.on_event, self.printer, self.chat = on_event, printer, chat

    def __call__(self, event: Event) -> None:
        self.on_event(event)


def _limit_flags(args: argparse.Namespace) -> RunLimits | str:
    """``--max-*`` as limits (unset: None; 0: none), or the one-line problem."""
    import math

    from tolaria.core.limits import RunLimits

    values: list[float | None] = []
    for flag, whole, what in (("max_time", False, "a number of seconds"),
                              ("max_cost", False, "a number of US dollars"),
                              ("max_tokens", True, "a whole number of tokens"),
                              ("max_tool_calls", True, "a whole number of tool calls")):
        text = getattr(args, flag, None)
        if text is None:
            values.append(None)
            continue
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            value = -1
        if not math.isfinite(value) or value < 0:
            name = "--" + flag.replace("_", "-")
            return f"{name} must be {what} (0 or more; 0 = no limit), got {text!r}"
        values.append(value)
    time_s, cost, tokens, calls = values
    return RunLimits(time_s, cost, int(tokens) if tokens is not None else None,
                     int(calls) if calls is not None else None)


async def _run_with_control(request: RunRequest, stream_id: str, output: _RunOutput,
                            grace: float, saved: SavedRun | None = None, *,
                            limits: tuple[RunLimits, RunLimits] | None = None) -> Done:
    """Run the turn through the turn engine (the window's, with a printer for observer):
    ``saved``'s, which stored and planned it, or a storeless one (``--no-save``).
    ``limits``: the ``--max-*`` flags and the settings' defaults (a chat's own between)."""
    import asyncio
    import os
    import signal

    from tolaria.chats.engine import TurnEngine
    from tolaria.chats.inflight import Launch
    from tolaria.cli.printer import JsonPrinter
    from tolaria.cli.run_observer import PrinterObserver
    from tolaria.core.process import control
    from tolaria.core.process.registry import STOPPING, default_registry
    from tolaria.support import crash
    from tolaria.support.tasks import TaskSet

    if sys.platform == "win32":  # refused in _cmd_run already: no SIGHUP, no signal handlers
        raise NotImplementedError("runs on Windows (docs/adr/0014-windows-job-objects.md)")
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(crash.asyncio_handler)
    registry = default_registry()
    observer = PrinterObserver(output.on_event, output.printer, loop)
    if saved is not None and saved.launch is not None:
        engine, launch, turn = saved.engine, saved.launch, saved.turn
        engine.observe(observer)
    else:
        engine = TurnEngine(None, registry, observer, TaskSet(), queues=False)
        launch = Launch(0, request.prompt, request.prompt, request.session_id,
                        request.manifest.id, request.cwd or os.getcwd())
        turn = None
    engine.grace_s = grace
    if not isinstance(output.printer, JsonPrinter):  # --json: one line per event, unbatched
        gate = engine.gate
        gate.batch_with(lambda: loop.call_soon(gate.flush))
    run_limits = None
    if limits is not None:
        flags, engine.limits = limits
        run_limits = flags.over(engine.limits_for(launch.conversation_id))
    # Reserved before the signal handlers go in: a Ctrl+C or SIGTERM from here on (while the
    # control socket starts, before the agent is spawned) stops the run, which ends cancelled.
    run = registry.reserve(stream_id, request.manifest.id, request.cwd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, engine.stop_stream, stream_id)
    if _early_signals:  # one came while the run started
        engine.stop_stream(stream_id)
    printer = output.printer
    printer.output.on_closed = lambda: engine.stop_stream(stream_id)
    printer.stopping = lambda: any(r["stream_id"] == stream_id and r["state"] == STOPPING
                                   for r in registry.live())
    chat: dict[str, str] = {"chat": output.chat} if output.chat is not None else {}
    if request.target is not None:  # ``tolaria streams`` names the host
        chat["host"] = request.target.label
    server = control.ControlServer(registry, details=lambda _stream_id: chat)
    try:
        await server.start()
        # The checkpoint before the turn (a stop kills it at once: the run then ends
        # cancelled), the agent, its Done, the checkpoint after: the engine's.
        task = engine.start(launch, stream_id, turn, request=request, run=run,
                            limits=run_limits)
        if task is not None:
            await task
        await engine.tasks.wait()
    finally:
        registry.unregister(run)  # a no-op once the runner ran it
        printer.output.unwatch()
        printer.detach()
        await server.close()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(sig)
    done = observer.done
    if done is None:
        raise RuntimeError(f"run {stream_id} ended without its Done")
    return done


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
