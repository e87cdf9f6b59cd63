"""``tolaria run``: one streamed turn headless, through the window's turn engine
(tolaria/chats/engine/) with a printer for observer; its exit codes are in tolaria/cli/main.py.

Imported only by ``tolaria run`` (tolaria/cli/main.py keeps the other subcommands' start-up
light).
"""

from __future__ import annotations

import sys

from tolaria.cli.exits import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_CANCELLED,
    EXIT_ERROR,
    EXIT_OK,
    early_signals,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from tolaria.chats.saved_runs import SavedRun
    from tolaria.cli.printer import Printer
    from tolaria.core.adapters.manifest import AdapterSet
    from tolaria.core.events import Done, Event
    from tolaria.core.limits import RunLimits
    from tolaria.core.turns.runner import RunRequest


def report_manifest_errors(adapters: AdapterSet) -> None:
    for err in adapters.errors:
        print(f"tolaria: broken adapter manifest: {err}", file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
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
    report_manifest_errors(adapters)
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

    from tolaria.chats.mentions.hosted import HostedMentions
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
    if args.host is None and saved is not None and saved.host is not None:
        args.host = saved.host  # ``--chat ID`` continues on the chat's host
        if saved.conversation is not None and saved.conversation.keep_running:
            args.keep_running = True  # and with its "keep running when disconnected"
    # On a host the folder is not here: a mention stays as typed (nothing local is read).
    request = prepared.request(args.prompt, cwd=args.run_cwd,
                               hosted=HostedMentions(None) if args.host is not None else None)
    if args.keep_running and args.host is None:
        print("tolaria: --keep-running needs --host (a run on this machine does not depend on "
              "a connection)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.host is not None:  # another machine (tolaria/cli/remote_run.py)
        from tolaria.cli.remote_run import with_host

        on_host = with_host(request, args.host, args.ssh_config, args.keep_running)
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
            request = saved.begin(request, stream_id, explicit_cwd=args.run_cwd,
                                  host=args.host, typed=args.prompt)
        except ValueError as exc:
            print(f"tolaria: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    grace = prepared.grace_s if args.grace is None else args.grace
    flags = args.limit_flags
    printer = make_printer(args.json)
    output = RunOutput(printer, printer,
                        saved.conversation.title if saved and saved.conversation else None)
    done = asyncio.run(run_with_control(request, stream_id, output, grace, saved,
                                         limits=(flags, prepared.limits)))
    if printer.output.closed:  # the reader went away: the run was stopped for that
        return EXIT_BROKEN_PIPE
    if done.stop_reason == STOP_END_TURN:
        return EXIT_OK
    if done.stop_reason == STOP_CANCELLED:
        return EXIT_CANCELLED
    return EXIT_ERROR


class RunOutput:
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


async def run_with_control(request: RunRequest, stream_id: str, output: RunOutput,
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
    if early_signals:  # one came while the run started
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
