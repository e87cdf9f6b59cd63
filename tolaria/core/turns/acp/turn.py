"""The runner's side of an ACP agent (protocol ``acp``): one turn over the Agent Client Protocol.

The agent is spawned here, not by the SDK: the SDK's spawner strips the environment (no
``TOLARIA_STREAM_ID``, so the tree could not be found) and never reads stderr (an agent that
writes a lot to stderr before answering ``initialize`` then hangs). We hand the child's stdin and
stdout to ``acp.connect_to_agent`` and drain stderr ourselves. Stop asks first (``session/cancel``,
the only stop that also ends the agent's running tool) and kills the tree only if the agent does
not answer ``stopReason: cancelled`` within the manifest's polite window. One agent process per
run for now, so the tree is always killed at the end. See docs/adr/0006-acp-runtime.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, cast

from tolaria import __version__
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_ERROR,
    Diagnostic,
    Done,
    Error,
    EventCallback,
    Init,
    Survivor,
)
from tolaria.core.linereader import read_lines
from tolaria.core.mcp.forms import acp_servers
from tolaria.core.mcp.servers import NOTE
from tolaria.core.permissions import PermissionChoice, PermissionRequest
from tolaria.core.process.registry import ProcessRegistry, Run
from tolaria.core.turns.acp.attach import AttachmentRefused, prompt_attachments
from tolaria.core.turns.acp.updates import UpdateMapper, result_usage, stop_reason
from tolaria.core.turns.process_turn import ProcessTurn, exit_code_of
from tolaria.core.turns.request import RunRequest
from tolaria.core.turns.spawn import ExitProtocol

if TYPE_CHECKING:
    from acp import Client
    from acp.schema import PermissionOption, RequestPermissionResponse, ToolCallUpdate

log = logging.getLogger(__name__)

_ALLOW = ("allow_once", "allow_always")
_REJECT = ("reject_once", "reject_always")


class _Client:
    """What the SDK calls into for the agent's requests and notifications."""

    def __init__(self, turn: AcpTurn) -> None:
        self._turn = turn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self._turn.on_update(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def request_permission(self, session_id: str, tool_call: ToolCallUpdate,
                                 options: list[PermissionOption],
                                 **kwargs: Any) -> RequestPermissionResponse:
        return await self._turn.on_permission(tool_call, options)


class AcpTurn(ProcessTurn):
    """One runner turn of an ACP agent: registered like any run, so ``abort`` stops it."""

    absolute_cwd = True  # ACP wants an absolute path

    def __init__(self, run: Run, request: RunRequest, emit: EventCallback,
                 registry: ProcessRegistry, grace_s: float, max_line: int) -> None:
        super().__init__(run, request, emit, registry, grace_s, max_line)
        self.mapper = UpdateMapper(run.stream_id)
        self.session_id: str | None = None
        self.stopping = False
        #: Permission requests waiting for ``request.on_permission``; Stop answers them None.
        self.pending_permissions: set[asyncio.Future[str | None]] = set()
        #: The SDK connection and the running initialize/session/prompt, for the wind down.
        self._conn: Any = None
        self._converse: asyncio.Future[dict[str, Any]] | None = None
        #: The agent's ``promptCapabilities`` (from ``initialize``): which attachments it takes.
        self.prompt_caps: Any = None

    def _not_ready(self) -> str | None:
        try:
            import acp  # noqa: F401
        except ImportError as exc:
            return f"ACP agents need the agent-client-protocol package ({exc})"
        return None

    async def _supervise(self, proc: asyncio.subprocess.Process, protocol: ExitProtocol,
                         cwd: str) -> Done:
        import acp

        from tolaria.core.turns.acp.noise import quiet_null_usage_errors

        quiet_null_usage_errors()
        self._killer(proc)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._readers = [asyncio.ensure_future(read_lines(proc.stderr, self._on_stderr,
                                                          self._on_oversized_err, self.max_line))]
        # _Client implements the two methods an agent may call here (fs and terminal are not
        # advertised); the SDK answers anything else with "method not found".
        self._conn = conn = acp.connect_to_agent(cast("Client", _Client(self)), proc.stdin,
                                                 proc.stdout)
        self._converse = converse = asyncio.ensure_future(self._converse_once(conn, cwd))
        stop = asyncio.ensure_future(self.run.stop_event.wait())
        exited_alone, cancelled, task_cancelled = await self._settle({converse, stop}, protocol)
        stop.cancel()
        exit_code = exit_code_of(proc.returncode) if exited_alone else None
        return self._report(self._final(converse, cancelled, exit_code), task_cancelled)

    async def _converse_once(self, conn: Any, cwd: str) -> dict[str, Any]:
        """initialize, session/new (or session/load), session/prompt: the prompt's result."""
        session = await self._open_session(conn, cwd, self.request.session_id)
        return await self._send_prompt(conn, session)

    async def _open_session(self, conn: Any, cwd: str, wanted: str | None) -> str:
        """initialize, then session/load of ``wanted`` when the agent can, else session/new.

        Sets ``session_id`` and emits ``init``. (A kept agent does this once per process.)
        """
        from acp import PROTOCOL_VERSION, RequestError
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        sid = self.run.stream_id
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                terminal=False),
            client_info=Implementation(name="tolaria", title="Tolaria", version=__version__))
        caps = init.agent_capabilities
        self.prompt_caps = getattr(caps, "prompt_capabilities", None)
        session = None
        if wanted and caps is not None and caps.load_session:
            # The agent replays the old conversation as updates: not news for this turn.
            self.mapper.muted = True
            try:
                await conn.load_session(cwd=cwd, session_id=wanted,
                                        mcp_servers=self._mcp_servers(caps))
                session = wanted
            except RequestError as exc:
                self.emit(Diagnostic(sid, source="acp", message=f"could not load session "
                                                                f"{wanted} ({exc}); starting a new one"))
            finally:
                self.mapper.muted = False
        elif wanted:
            self.emit(Diagnostic(sid, source="acp", message="the agent cannot load an earlier "
                                                            "session; starting a new one"))
        if session is None:
            session = (await conn.new_session(cwd=cwd,
                                              mcp_servers=self._mcp_servers(caps))).session_id
        self.session_id = session
        self.emit(Init(sid, agent=self.manifest.id, session_id=session))
        return session

    def _mcp_servers(self, caps: Any) -> list[Any]:
        """The run's MCP servers as the agent's ``mcpCapabilities`` allow (stdio always); the
        others are said in the chat (ADR 0019)."""
        from acp.schema import HttpMcpServer, McpServerStdio, SseMcpServer

        mcp_caps = getattr(caps, "mcp_capabilities", None)
        entries, left_out = acp_servers(
            self.mcp.plan.passed, self.mcp.marker,
            http=bool(getattr(mcp_caps, "http", False)), sse=bool(getattr(mcp_caps, "sse", False)))
        target = self.request.target
        agent = self.manifest.name + (f" on {target.label}" if target is not None else "")
        for name, why in left_out:
            self.emit(Diagnostic(self.run.stream_id, source=NOTE,
                                 message=f"MCP server {name!r} is not passed to {agent}: {why}"))
        out: list[Any] = []
        for entry in entries:
            kind = entry.get("type")
            model = HttpMcpServer if kind == "http" else SseMcpServer if kind == "sse" else None
            out.append(model.model_validate(entry) if model is not None
                       else McpServerStdio.model_validate(entry))
        return out

    async def _send_prompt(self, conn: Any, session: str) -> dict[str, Any]:
        """session/prompt with the request's text: the prompt's result."""
        from acp.schema import TextContentBlock
        from pydantic import ValidationError

        sid = self.run.stream_id
        extra = prompt_attachments(self.request, self.prompt_caps, self.manifest.name)
        if isinstance(extra, str):  # an image for an agent that takes none (ADR 0028)
            raise AttachmentRefused(extra)
        try:
            response = await conn.prompt(session_id=session,
                                         prompt=[TextContentBlock(type="text",
                                                                  text=self.request.prompt),
                                                 *extra])
        except ValidationError as exc:
            # An answer we cannot parse (another protocol version) still ends the turn.
            self.emit(Diagnostic(sid, source="acp", message=f"unexpected session/prompt result: "
                                                            f"{str(exc)[:300]}"))
            return {}
        result: dict[str, Any] = response.model_dump(mode="json", by_alias=True, exclude_none=True)
        return result

    # -- the wind down's steps (ProcessTurn._wind_down) ------------------------------------------
    async def _ask_to_stop(self, protocol: ExitProtocol) -> bool:
        assert self._converse is not None
        await self._polite_stop(self._conn, self._converse)
        return False

    def _exit_moment(self, cancelled: bool) -> float:
        converse = self._converse
        failed = converse is not None and converse.done() and (
            converse.cancelled() or converse.exception() is not None)
        return 0.5 if failed and not cancelled else 0.0

    async def _end_processes(self, keep: bool, cancelled: bool) -> list[Survivor]:
        """The process is per run: its whole tree goes, stopped or finished."""
        assert self._tree is not None
        return await self._tree.kill(self.grace_s)

    async def _stop_reading(self) -> None:
        """End the conversation task, then the connection and stderr (a kept agent's are the
        keeper's)."""
        converse = self._converse
        if converse is not None:
            if not converse.done():
                converse.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(converse), 1)
        if not self.owns_process:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._conn.close(), 1)
        for reader in await self._drain(self._readers, "stderr"):
            reader.cancel()

    async def _polite_stop(self, conn: Any, converse: asyncio.Future[dict[str, Any]]) -> None:
        sid = self.run.stream_id
        self.stopping = True  # permission requests from now on are answered "cancelled"
        for pending in self.pending_permissions:
            if not pending.done():
                pending.set_result(None)
        for event in self.mapper.cancel_open_tools():
            self.emit(event)
        if converse.done() or self.session_id is None:
            return  # nothing to cancel yet (still starting) or already over
        window = self.manifest.stop.polite_window_ms / 1000
        try:
            await asyncio.wait_for(conn.cancel(session_id=self.session_id), window)
        except Exception as exc:
            self.emit(Diagnostic(sid, source="tolaria",
                                 message=f"could not send session/cancel ({exc}); "
                                         "ending the agent's processes"))
            return
        await asyncio.wait({converse}, timeout=window)
        if not converse.done():
            self.emit(Diagnostic(sid, source="tolaria",
                                 message=f"{self.manifest.name} did not end the turn within "
                                         f"{window * 1000:.0f} ms of session/cancel; "
                                         "ending its processes"))

    def _final(self, converse: asyncio.Future[dict[str, Any]], cancelled: bool,
               exit_code: int | None) -> Done:
        from acp import RequestError

        sid = self.run.stream_id
        if cancelled:
            return self._done(STOP_CANCELLED, exit_code)
        exc = None if converse.cancelled() else converse.exception()
        if converse.cancelled() or exc is not None:
            for event in self.mapper.close_open_tools("the turn ended before this tool finished"):
                self.emit(event)
        if exc is None and not converse.cancelled():
            result = converse.result()
            usage = result_usage(sid, result)
            if usage is not None:
                self.emit(usage)
            return self._done(stop_reason(result), exit_code)
        name = self.manifest.name
        if isinstance(exc, RequestError):
            message = f"{name}: {exc}"
        elif isinstance(exc, AttachmentRefused):
            message = str(exc)
        elif isinstance(exc, ConnectionError) or converse.cancelled():
            code = "" if exit_code is None else f" (exit code {exit_code})"
            message = f"{name} exited before the turn ended{code}"
        else:
            log.error("ACP turn %s failed", sid, exc_info=exc)
            message = f"{name}: {type(exc).__name__}: {exc}"
        tail = "\n".join(self.stderr_tail)
        self.emit(Error(sid, message=f"{message}\n{tail}" if tail else message))
        return self._done(STOP_ERROR, exit_code)

    # -- called by the SDK (through _Client) ---------------------------------------------------
    def on_update(self, update: dict[str, Any]) -> None:
        for event in self.mapper.feed(update):
            self.emit(event)

    async def on_permission(self, tool_call: ToolCallUpdate,
                            options: list[PermissionOption]) -> RequestPermissionResponse:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        sid = self.run.stream_id
        title = tool_call.title or tool_call.tool_call_id
        full = self.permission_mode == "full"
        hook = self.request.on_permission
        option_id: str | None = None
        if self.stopping:
            pass
        elif full or hook is None:
            option = _pick(options, _ALLOW if full else _REJECT)
            if option is not None:
                option_id = option.option_id
                message = (f"allowed {title!r} ({option.name}): permission mode \"full\"" if full
                           else f"rejected {title!r}: permission mode \"safe\" and no one to ask "
                                "(run in \"full\" mode, or set permissions = \"full\" in the "
                                "agent's manifest, to allow)")
                self.emit(Diagnostic(sid, source="permission", message=message))
        else:
            option_id = await self._ask(hook, PermissionRequest(
                sid, tool_call.tool_call_id, title, tool_call.raw_input,
                tuple(PermissionChoice(o.option_id, o.name, str(o.kind)) for o in options),
                kind=str(tool_call.kind or "")))
            chosen = next((o for o in options if o.option_id == option_id), None)
            option_id = chosen.option_id if chosen is not None else None
            if chosen is not None:  # kept with the turn: what was allowed, and how
                verb = "allowed" if chosen.kind in _ALLOW else "rejected"
                self.emit(Diagnostic(sid, source="permission",
                                     message=f"you {verb} {title!r} ({chosen.name})"))
        if option_id is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option_id))

    async def _ask(self, hook: Any, request: PermissionRequest) -> str | None:
        """The hook's answer, or None once Stop answered for it (or the hook failed)."""
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self.pending_permissions.add(answer)

        async def consult() -> None:
            try:
                choice = await hook(request)
            except Exception as exc:
                log.exception("permission callback failed for %s", request.stream_id)
                self.emit(Diagnostic(request.stream_id, source="permission",
                                     message=f"permission prompt failed ({exc}); not allowed"))
                choice = None
            if not answer.done():
                answer.set_result(choice)

        asker = asyncio.ensure_future(consult())
        try:
            return await answer
        finally:
            self.pending_permissions.discard(answer)
            asker.cancel()


def _pick(options: list[PermissionOption], kinds: tuple[str, ...]) -> PermissionOption | None:
    for kind in kinds:
        for option in options:
            if option.kind == kind:
                return option
    return None

