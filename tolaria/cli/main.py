"""The ``tolaria`` command: no subcommand opens the window; subcommands run headless.

Exit codes of ``tolaria run``: 0 end_turn, 130 cancelled, 1 agent error (or the turn could not
be saved: disk full), 2 bad input.
``tolaria run`` keeps its turn in the window's store (a new chat, or ``--chat ID``); see
tolaria/chats/saved_runs.py. ``tolaria chats`` lists the stored chats.
``tolaria abort``: 0 stopped, 1 nothing running under that id, 2 invalid id.
``tolaria models`` and ``tolaria key``: 0 done, 1 endpoint or keyring failure, 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import signal
import sqlite3
import sys
from typing import Any

from tolaria import __version__
from tolaria.chats.saved_runs import ChatError, SavedRun, list_chats, open_store
from tolaria.config.overrides import AgentSettingsError, prepare_run
from tolaria.core.adapters.manifest import AdapterSet, load_adapters
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_END_TURN,
    Diagnostic,
    Done,
    Error,
    Event,
    TextDelta,
    ToolDone,
    ToolStart,
    to_dict,
)
from tolaria.core.process import control
from tolaria.core.process.registry import default_registry
from tolaria.core.programs import discovery
from tolaria.core.stream_id import InvalidStreamId, new_stream_id, validate_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent
from tolaria.support import crash, paths

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_CANCELLED = 0, 1, 2, 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tolaria", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"tolaria {__version__}")
    p.add_argument("--agent", help="agent to preselect in the window")
    p.add_argument("--cwd", help="working folder to preselect in the window")
    sub = p.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run one agent turn headless and stream it")
    run.add_argument("--agent", dest="run_agent",
                     help="adapter id (see `tolaria agents`); with --chat, the chat's agent")
    run.add_argument("--cwd", dest="run_cwd", help="working folder of the agent")
    run.add_argument("--stream-id", help="use this stream id instead of a new one")
    run.add_argument("--json", action="store_true", help="one JSON event per line")
    run.add_argument("--grace", type=float, default=None,
                     help="seconds between SIGTERM and SIGKILL when stopping (default: "
                          "[behaviour] grace_seconds in settings.toml, else 2)")
    run.add_argument("prompt")
    saving = run.add_mutually_exclusive_group()
    saving.add_argument("--chat", type=int, metavar="ID",
                        help="add this turn to a stored chat (see `tolaria chats`); default: a "
                             "new chat titled from the prompt")
    saving.add_argument("--no-save", action="store_true",
                        help="do not keep the turn in the store (nothing to recover or reopen)")
    chats = sub.add_parser("chats", help="list the stored chats (the window's sidebar)")
    chats.add_argument("--json", action="store_true")
    agents = sub.add_parser("agents", help="list adapters with detected path and version")
    agents.add_argument("--json", action="store_true")
    streams = sub.add_parser("streams", help="list live runs of every Tolaria process")
    streams.add_argument("--json", action="store_true")
    abort = sub.add_parser("abort", help="stop a run owned by any Tolaria process")
    abort.add_argument("stream_id")
    models = sub.add_parser("models", help="list the models a model endpoint offers (/models)")
    models.add_argument("models_agent", metavar="agent", help="an openai-chat adapter id")
    models.add_argument("--json", action="store_true")
    models.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    key = sub.add_parser("key", help="store or delete a model endpoint's API key in the "
                                     "system keyring")
    key.add_argument("key_action", choices=("set", "delete"))
    key.add_argument("key_agent", metavar="agent", help="an openai-chat adapter id; the key "
                                                        "is read from a hidden prompt or stdin")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:
        return _open_window(args)
    crash.install("cli")  # the window installs its own hooks (tolaria.app.main.run)
    try:
        return _command(args)
    except OSError as exc:  # a read-only home, a socket folder of another user: not a bug
        problem = paths.access_problem(exc)
        if problem is None:
            raise
        print(f"tolaria: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _command(args: argparse.Namespace) -> int:
    if args.command == "run":
        return _cmd_run(args)
    if args.command == "chats":
        return _cmd_chats(args.json)
    if args.command == "agents":
        return asyncio.run(_cmd_agents(args.json))
    if args.command == "streams":
        return asyncio.run(_cmd_streams(args.json))
    if args.command == "abort":
        return asyncio.run(_cmd_abort(args.stream_id))
    if args.command == "models":
        from tolaria.cli.models import cmd_models

        return cmd_models(args.models_agent, args.json, args.timeout)
    if args.command == "key":
        from tolaria.cli.models import cmd_key

        return cmd_key(args.key_action, args.key_agent)
    raise AssertionError(f"unknown command {args.command!r}")


def _open_window(args: argparse.Namespace) -> int:
    # Imported here: the headless subcommands must not pay for (or need) Qt.
    from tolaria.app.main import run

    return run(agent=args.agent, cwd=args.cwd)


def _report_manifest_errors(adapters: AdapterSet) -> None:
    for err in adapters.errors:
        print(f"tolaria: broken adapter manifest: {err}", file=sys.stderr)


def _cmd_run(args: argparse.Namespace) -> int:
    adapters = load_adapters()
    _report_manifest_errors(adapters)
    try:
        saved = None if args.no_save else SavedRun.open(args.chat)
    except (ChatError, OSError, sqlite3.Error, RuntimeError) as exc:  # RuntimeError: schema
        problem = paths.access_problem(exc)
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
    request = RunRequest(manifest=prepared.manifest, prompt=args.prompt,
                         cwd=args.run_cwd or prepared.cwd, retry_limit_s=prepared.retry_limit_s,
                         **prepared.options)
    if saved is not None:  # the turn goes into the store first (history, resume, chat folder)
        try:
            request = saved.begin(request, stream_id, explicit_cwd=args.run_cwd)
        except ValueError as exc:
            print(f"tolaria: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    grace = prepared.grace_s if args.grace is None else args.grace
    printer: Any = _JsonPrinter() if args.json else _TextPrinter()
    if saved is not None:
        printer = saved.record(printer)
    done = asyncio.run(_run_with_control(request, stream_id, printer, grace))
    if done.stop_reason == STOP_END_TURN:
        return EXIT_OK
    if done.stop_reason == STOP_CANCELLED:
        return EXIT_CANCELLED
    return EXIT_ERROR


async def _run_with_control(request: RunRequest, stream_id: str, printer: Any, grace: float) -> Done:
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(crash.asyncio_handler)
    registry = default_registry()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, registry.abort, stream_id)
    server = control.ControlServer(registry)
    await server.start()
    try:
        return await stream_ai_agent(request, stream_id, printer, registry=registry, grace_s=grace)
    finally:
        await server.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


class _JsonPrinter:
    def __call__(self, event: Event) -> None:
        sys.stdout.write(json.dumps(to_dict(event), ensure_ascii=False) + "\n")
        sys.stdout.flush()


class _TextPrinter:
    """Text to stdout; tool calls, errors and the final status to stderr."""

    def __init__(self) -> None:
        self._after_tool = False

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if self._after_tool:
                sys.stdout.write("\n\n")
                self._after_tool = False
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, ToolStart):
            self._after_tool = True
            summary = json.dumps(event.input, ensure_ascii=False)[:120]
            print(f"\n[tool {event.name}: {summary}]", file=sys.stderr, flush=True)
        elif isinstance(event, ToolDone):
            status = "failed" if event.is_error else "done"
            print(f"[tool {status}]", file=sys.stderr, flush=True)
        elif isinstance(event, Error):
            print(f"\nerror: {event.message}", file=sys.stderr, flush=True)
            if event.hint:
                print(f"hint: {event.hint}", file=sys.stderr, flush=True)
        elif isinstance(event, Diagnostic) and event.source == "retry":
            print(f"[{event.message}]", file=sys.stderr, flush=True)
        elif isinstance(event, Done):
            sys.stdout.write("\n")
            survivors = ", ".join(f"{s.name} ({s.pid})" for s in event.survivors)
            extra = f"; still alive: {survivors}" if survivors else ""
            print(f"[done: {event.stop_reason}, {event.duration_ms} ms{extra}]", file=sys.stderr,
                  flush=True)


def _cmd_chats(as_json: bool) -> int:
    try:
        store = open_store()
    except (OSError, sqlite3.Error, RuntimeError) as exc:
        problem = paths.access_problem(exc)
        print(f"tolaria: {problem or f'cannot open the store: {exc}'}", file=sys.stderr)
        return EXIT_BAD_INPUT if problem else EXIT_ERROR
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


async def _cmd_streams(as_json: bool) -> int:
    streams = await control.list_streams()
    if as_json:
        print(json.dumps(streams, indent=2))
    elif not streams:
        print("no live runs")
    else:
        for s in streams:
            print(f"{s['stream_id']}  {s['agent']:<10} {s['state']:<9} {s.get('cwd') or ''}")
    return EXIT_OK


async def _cmd_abort(stream_id: str) -> int:
    try:
        validate_stream_id(stream_id)
    except InvalidStreamId as exc:
        print(f"tolaria: {exc}", file=sys.stderr)
        print("false")
        return EXIT_BAD_INPUT
    stopped = await control.abort_remote(stream_id)
    print("true" if stopped else "false")
    return EXIT_OK if stopped else EXIT_ERROR
