"""The tools a direct model chat may call, confined to the chat's working folder.

``read_file``, ``list_directory`` and ``search_text`` are read-only and run in a worker thread
that polls the cancel check. ``run_command`` starts a real child process (``/bin/sh -c``: the
model asked for a shell line) in its own session, with ``TOLARIA_STREAM_ID=<stream id>`` in its
environment like every agent process, so the run's tree kill (and Stop) reaches everything it
starts. A cancelled command's tree is killed at once. In "safe" mode (``approve_command`` set by
the chat turn) each command is approved first; a cancel while the question is open wins. See
docs/adr/0005-direct-model-chats.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tolaria.core.cancel import Cancelled
from tolaria.core.process import proctree

MAX_OUTPUT = 64 * 1024
MAX_READ = 256 * 1024
MAX_MATCHES = 200
COMMAND_TIMEOUT_S = 600.0
_POLL_S = 0.01
_SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv"}

TOOL_SPECS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "read_file",
        "description": "Read a text file of the working folder.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "path relative to the working folder"}},
            "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "list_directory",
        "description": "List a folder of the working folder (folders end with '/').",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "path relative to the working folder",
                     "default": "."}}}}},
    {"type": "function", "function": {
        "name": "search_text",
        "description": "Search the files under a folder for a regular expression; "
                       "returns path:line: text matches.",
        "parameters": {"type": "object", "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string", "default": "."}},
            "required": ["pattern"]}}},
    {"type": "function", "function": {
        "name": "run_command",
        "description": "Run a shell command in the working folder; returns its exit code and "
                       "output (stdout and stderr).",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string"}},
            "required": ["command"]}}},
]
TOOL_NAMES = tuple(spec["function"]["name"] for spec in TOOL_SPECS)


#: Asked before a command runs: None to run it, or why not (the model's tool result).
ApproveCommand = Callable[[str], Awaitable[str | None]]


class ToolError(Exception):
    """A tool call that cannot be done; its message goes back to the model as the result."""


@dataclass(frozen=True)
class ToolResult:
    output: str
    is_error: bool = False


def command_env(stream_id: str, base: Mapping[str, str] | None = None,
                hide: tuple[str, ...] = ()) -> dict[str, str]:
    """``tolaria.core.turns.spawn.build_env`` semantics for tool commands: the run's marker,
    no app marker.

    ``hide`` names variables never passed on (the API key's variable).
    """
    env = dict(os.environ if base is None else base)
    for name in hide:
        env.pop(name, None)
    return proctree.mark_env(env, stream_id)


class Toolbox:
    """Runs tool calls for one chat: working folder, environment, cancel check."""

    def __init__(self, cwd: str | Path, stream_id: str, env: Mapping[str, str] | None = None,
                 *, grace_s: float = 0.5, command_timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        self.root = Path(cwd).resolve()
        self.stream_id = stream_id
        self.env = dict(env) if env is not None else command_env(stream_id)
        proctree.mark_env(self.env, stream_id)
        self.grace_s = grace_s
        self.command_timeout_s = command_timeout_s
        self.ran_commands = False
        #: "safe" mode: asked before each ``run_command`` (the other tools only read); None to
        #: run it, or the text the model gets instead. None here: commands run without asking.
        self.approve_command: ApproveCommand | None = None

    # -- dispatch ------------------------------------------------------------------------------
    async def call(self, name: str, args: dict[str, Any], cancelled: Callable[[], bool],
                   cancel_event: asyncio.Event) -> ToolResult:
        try:
            if name == "run_command":
                command = _str_arg(args, "command")
                if self.approve_command is not None:
                    refusal = await self._approval(self.approve_command, command, cancel_event)
                    if refusal is not None:
                        return ToolResult(refusal, is_error=True)
                return await self.run_command(command, cancel_event)
            if name not in ("read_file", "list_directory", "search_text"):
                raise ToolError(f"unknown tool {name!r} (tools: {', '.join(TOOL_NAMES)})")
            fn = getattr(self, name)
            return ToolResult(await asyncio.to_thread(fn, args, cancelled))
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", is_error=True)

    def resolve(self, path: object) -> Path:
        """A path of the working folder; ``..`` escapes and outside absolute paths are errors."""
        if path is None or path == "":
            path = "."
        if not isinstance(path, str):
            raise ToolError("path must be a string")
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root):
            raise ToolError(f"path {path!r} is outside the working folder {self.root}")
        return target

    # -- read-only tools (worker thread) -------------------------------------------------------
    def read_file(self, args: dict[str, Any], cancelled: Callable[[], bool]) -> str:
        target = self.resolve(_str_arg(args, "path"))
        if not target.is_file():
            raise ToolError(f"{args['path']!r} is not a file")
        try:
            with open(target, "rb") as fh:
                data = fh.read(MAX_READ + 1)
        except OSError as exc:
            raise ToolError(f"cannot read {args['path']!r}: {exc.strerror or exc}") from exc
        text = data[:MAX_READ].decode("utf-8", errors="replace")
        return text + ("\n[truncated]" if len(data) > MAX_READ else "")

    def list_directory(self, args: dict[str, Any], cancelled: Callable[[], bool]) -> str:
        target = self.resolve(args.get("path", "."))
        if not target.is_dir():
            raise ToolError(f"{args.get('path', '.')!r} is not a folder")
        try:
            entries = sorted(os.scandir(target), key=lambda e: e.name)
        except OSError as exc:
            raise ToolError(f"cannot list {args.get('path', '.')!r}: {exc.strerror or exc}") from exc
        names = [e.name + ("/" if e.is_dir() else "") for e in entries]
        return "\n".join(names) if names else "(empty)"

    def search_text(self, args: dict[str, Any], cancelled: Callable[[], bool]) -> str:
        pattern = _str_arg(args, "pattern")
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"bad regular expression: {exc}") from exc
        target = self.resolve(args.get("path", "."))
        files = [target] if target.is_file() else []
        matches: list[str] = []
        if target.is_dir():
            for folder, dirs, names in os.walk(target):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
                files.extend(Path(folder) / n for n in sorted(names))
        for path in files:
            if cancelled():
                raise Cancelled("cancelled")
            try:
                if path.stat().st_size > 4 * MAX_READ:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:4096]:
                continue
            for no, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if regex.search(line):
                    matches.append(f"{path.relative_to(self.root)}:{no}: {line[:300]}")
                    if len(matches) >= MAX_MATCHES:
                        return "\n".join(matches) + "\n[more matches not shown]"
        return "\n".join(matches) if matches else "no matches"

    # -- run_command ---------------------------------------------------------------------------
    async def _approval(self, approve: ApproveCommand, command: str,
                        cancel_event: asyncio.Event) -> str | None:
        """``approve``'s answer; a cancel while it is pending wins (raises Cancelled) and
        cancels the question, so whoever asks the user can close the prompt."""
        if cancel_event.is_set():
            raise Cancelled("cancelled")
        asking = asyncio.ensure_future(approve(command))
        stop = asyncio.ensure_future(cancel_event.wait())
        try:
            await asyncio.wait({asking, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not asking.done():
                asking.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asking
        if cancel_event.is_set() or asking.cancelled():
            raise Cancelled("cancelled")
        return asking.result()

    async def run_command(self, command: str, cancel_event: asyncio.Event) -> ToolResult:
        """Run ``command``; on cancel or timeout kill its whole tree (raises Cancelled on cancel)."""
        if cancel_event.is_set():
            raise Cancelled("cancelled")
        self.ran_commands = True
        # Output goes to a file, not a pipe: a background child holding the pipe can then never
        # keep us waiting after the shell itself has exited.
        with tempfile.TemporaryFile() as out:
            try:
                proc = await asyncio.create_subprocess_exec(
                    "/bin/sh", "-c", command, stdin=asyncio.subprocess.DEVNULL, stdout=out,
                    stderr=asyncio.subprocess.STDOUT, cwd=self.root,
                    env={**self.env, "PWD": str(self.root)}, start_new_session=True)
            except OSError as exc:
                raise ToolError(f"cannot start the command: {exc.strerror or exc}") from exc
            proctree.remember_own_child(proc.pid)
            try:
                root: psutil.Process | None = psutil.Process(proc.pid)
            except psutil.Error:
                root = None
            exited = asyncio.ensure_future(proc.wait())
            stop = asyncio.ensure_future(cancel_event.wait())
            finished = False
            try:
                await asyncio.wait({exited, stop}, timeout=self.command_timeout_s,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                finished = exited.done()
                if not finished:
                    # Cancelled, timed out, or the awaiting task was cancelled: the tree goes now.
                    await proctree.TreeKiller(self.stream_id, root, sole_run=lambda: False).kill(
                        self.grace_s)
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(exited), 5)
                stop.cancel()
                proctree.forget_own_child(proc.pid)
            if not finished and cancel_event.is_set():
                raise Cancelled("cancelled")
            timed_out = not finished
            out.seek(0)
            data = out.read(MAX_OUTPUT + 1)
        text = data[:MAX_OUTPUT].decode("utf-8", errors="replace")
        if len(data) > MAX_OUTPUT:
            text += "\n[output truncated]"
        if timed_out:
            return ToolResult(f"timed out after {self.command_timeout_s:g} s; killed\n{text}", True)
        code = proc.returncode
        code = 128 - code if code is not None and code < 0 else code
        return ToolResult(f"exit code {code}\n{text}", is_error=code != 0)

    async def cleanup(self) -> None:
        """End whatever commands of this chat left running in the background."""
        if self.ran_commands:
            await proctree.TreeKiller(self.stream_id, None, sole_run=lambda: False).kill(self.grace_s)


def _str_arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise ToolError(f"argument {key!r} must be a non-empty string")
    return value
