"""Direct model chats: an OpenAI-compatible Chat Completions client with a cancellable tool loop.

``ChatHelper.prompt`` streams one turn (``stream: true``, server-sent events) and runs the tools
the model asks for (tolaria/core/modelchat/tools.py) until the model answers without tool calls or
``max_iterations`` tool rounds were done. Cancellation (tolaria/core/cancel.py) is checked at
every loop boundary: before each request, between streamed chunks, before and after each tool
call. The in-flight HTTP response is closed at once and a running command's tree is killed.
A cancelled turn keeps its partial answer, and every tool call the model asked for gets a tool
message, so the history stays valid for the next prompt. ``tolaria.core.turns.model_turn`` plugs a helper into
the runner (protocol ``openai-chat``). See docs/adr/0005-direct-model-chats.md.

Some local models and servers reject a request that carries ``tools`` (Ollama: HTTP 400 "<model>
does not support tools"; llama.cpp without ``--jinja``; vLLM without a tool parser). That answer
is recognised, the same request is sent once more without tools, and a notice tells the user;
``use_tools`` stays off for the rest of the helper's life (``tools_rejected`` says it happened).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tolaria.core.cancel import CancellationToken, Cancelled
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_END_TURN,
    STOP_ERROR,
    STOP_MAX_ITERATIONS,
    Diagnostic,
    Error,
    Event,
    EventCallback,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    Usage,
)
from tolaria.core.modelchat.tools import TOOL_SPECS, Toolbox, ToolResult, command_env
from tolaria.core.stream_id import new_stream_id
from tolaria.support.redact import hide_values, redact_text

log = logging.getLogger(__name__)

DEFAULT_MAX_ITERATIONS = 8
CANCELLED_TOOL_RESULT = "Tool call cancelled"
#: How often a token flipped elsewhere (another thread or process) is looked at while waiting.
CANCEL_POLL_S = 0.01
#: ``Diagnostic.source`` of a note meant for the user (shown in the turn, not as stderr).
NOTICE = "notice"
#: An HTTP error body that means "this model/server cannot take ``tools``".
_TOOLS_REJECTED = re.compile(
    r"(does not|doesn't|do not|cannot) support (tools|tool[ _]?(calls|calling|use)|function"
    r"[ _]?calling)|(tools?|function[ _]?calling|tool[ _]choice)\b[^.]{0,60}\b(not supported|"
    r"unsupported|not enabled|requires --)|tools param requires|enable-auto-tool-choice",
    re.IGNORECASE)
_TOOLS_REJECTED_STATUS = frozenset({400, 422, 500, 501})


class ChatError(Exception):
    """The endpoint failed (connection, HTTP status, malformed reply)."""


class ToolsRejected(ChatError):
    """The endpoint refused the request because it carried ``tools``."""


def rejects_tools(status: int, body: str) -> bool:
    """Whether an HTTP error answer means the model or server does not take ``tools``."""
    return status in _TOOLS_REJECTED_STATUS and bool(_TOOLS_REJECTED.search(body))


@dataclass
class _Reply:
    text: str = ""
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish_reason: str | None = None
    cancelled: bool = False

    def tool_calls(self) -> list[dict[str, Any]]:
        out = []
        for n, (_, call) in enumerate(sorted(self.calls.items())):
            out.append({"id": call["id"] or f"call_{n}", "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"]}})
        return out


#: The usual local model servers by port, and how to start each.
_LOCAL_SERVERS = {11434: ("Ollama", "ollama serve"), 1234: ("LM Studio", "lms server start"),
                  8080: ("llama.cpp", "llama-server -m model.gguf --jinja")}


def unreachable_next_step(url: str) -> str:
    """"cannot reach …" plus the one thing to do, instead of httpx's "All connection attempts
    failed"."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host in ("localhost", "127.0.0.1", "::1", "0.0.0.0"):
        try:
            port = parts.port
        except ValueError:
            port = None
        name, command = _LOCAL_SERVERS.get(port or 0, ("the model server", ""))
        start = f"start it with `{command}`" if command else "start it"
        return (f"cannot reach {url}: nothing is listening there — {name} is not running; "
                f"{start}, then send again")
    return f"cannot reach {url}: check the address and your network connection, then send again"


class ChatHelper:
    """One conversation with an OpenAI-compatible endpoint; ``messages`` is its history."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 cwd: str | Path = ".", stream_id: str | None = None,
                 on_event: EventCallback | None = None,
                 cancellation: CancellationToken | None = None,
                 on_cancel_check: Callable[[], bool] | None = None,
                 max_iterations: int = DEFAULT_MAX_ITERATIONS, stream: bool = True,
                 tools: bool = True, env: Mapping[str, str] | None = None,
                 grace_s: float = 0.5, system_prompt: str | None = None,
                 timeout_s: float = 300.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key or None
        self.stream_id = stream_id or new_stream_id()
        self._on_event = on_event
        self._owns_token = cancellation is None
        self._token = cancellation if cancellation is not None else CancellationToken()
        self.on_cancel_check = on_cancel_check
        self.max_iterations = max_iterations
        self.stream = stream
        self.use_tools = tools
        #: The endpoint refused ``tools`` during this helper's life (``use_tools`` is now off).
        self.tools_rejected = False
        self.toolbox = Toolbox(cwd, self.stream_id, env if env is not None else
                               command_env(self.stream_id), grace_s=grace_s)
        self.timeout_s = timeout_s
        self.messages: list[dict[str, Any]] = []
        if system_prompt:
            self.messages.append({"role": "system", "content": system_prompt})
        self.stop_reason = ""
        self._iteration = 0
        #: What this prompt's requests spent so far (each ``Usage`` reports the total).
        self._spent = _Spent()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cancel_event: asyncio.Event | None = None
        self.requests_sent = 0

    # -- cancellation --------------------------------------------------------------------------
    @property
    def cancellation(self) -> CancellationToken:
        """The token: hand it to other threads, processes or helpers to cancel together."""
        return self._token

    def cancel(self) -> None:
        """Same-process shortcut for ``cancellation.cancel()``; safe from any thread."""
        self._token.cancel()
        loop, event = self._loop, self._cancel_event
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed: nothing to wake
                loop.call_soon_threadsafe(event.set)

    def is_cancelled(self) -> bool:
        if self._token.cancelled:
            return True
        if self.on_cancel_check is not None:
            try:
                return bool(self.on_cancel_check())
            except Exception:
                log.exception("on_cancel_check failed")
        return False

    async def _watch(self, event: asyncio.Event) -> None:
        # Polled on purpose: a token flipped by another process (or on_cancel_check) cannot
        # wake an asyncio.Event; cancel() in this process wakes ``event`` directly.
        while not self.is_cancelled():  # noqa: ASYNC110
            await asyncio.sleep(CANCEL_POLL_S)
        event.set()

    # -- the turn ------------------------------------------------------------------------------
    async def prompt(self, text: str, parts: Sequence[dict[str, Any]] = ()) -> str:
        """Run one turn for the user message ``text``; return (and set) ``stop_reason``.
        ``parts``: attachments' ``image_url`` parts after the text (ADR 0028)."""
        if self._cancel_event is not None:
            raise RuntimeError("this chat is already running a prompt")
        if self._owns_token:
            self._token.reset()  # each prompt is a fresh cancel scope; an injected token is not ours
        self.stop_reason = ""
        self._iteration = 0
        self._spent = _Spent()
        self.messages.append({"role": "user", "content": (
            [{"type": "text", "text": text}, *parts] if parts else text)})
        self._loop = asyncio.get_running_loop()
        event = self._cancel_event = asyncio.Event()
        watcher = asyncio.ensure_future(self._watch(event))
        try:
            import httpx  # only model chats need httpx

            async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s, connect=15.0)) as client:
                self.stop_reason = await self._loop_turn(client)
        except ChatError as exc:
            self._emit(Error(self.stream_id, message=self.redact_for_user(str(exc))))
            self.stop_reason = STOP_CANCELLED if self.is_cancelled() else STOP_ERROR
        finally:
            watcher.cancel()
            self._cancel_event = None
            self._loop = None
            await self.toolbox.cleanup()
        return self.stop_reason

    async def _loop_turn(self, client: Any) -> str:
        while True:
            if self.is_cancelled():  # before each request: never send one after a cancel
                return STOP_CANCELLED
            try:
                reply = await self._request(client)
            except ToolsRejected:
                # Retry the same request once without tools (use_tools is now off, so a
                # second refusal is an ordinary error) and say so once.
                self.use_tools = False
                self.tools_rejected = True
                self._emit(Diagnostic(self.stream_id, source=NOTICE,
                                      message=f"{self.model} does not support tools; "
                                              "answering without them"))
                continue
            calls = [] if reply.cancelled else reply.tool_calls()
            if reply.text or calls:
                message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
                if calls:
                    message["tool_calls"] = calls
                self.messages.append(message)
            if reply.cancelled:
                return STOP_CANCELLED
            if not calls:
                return STOP_END_TURN
            # Cancel wins over max_iterations, which wins over continuing.
            if self.is_cancelled():
                self._answer_all(calls, CANCELLED_TOOL_RESULT)
                return STOP_CANCELLED
            if self._iteration >= self.max_iterations:
                self._answer_all(calls, f"Tool call not run: the turn reached max_iterations "
                                        f"({self.max_iterations})")
                rounds = "tool round" if self.max_iterations == 1 else "tool rounds"
                self._emit(Diagnostic(self.stream_id, source=NOTICE,
                                      message=f"Stopped after {self.max_iterations} {rounds} "
                                              "(max_iterations); send a message to continue"))
                return STOP_MAX_ITERATIONS
            self._iteration += 1
            await self._run_tools(calls)
            if self.is_cancelled():  # tools may have been cancelled mid-chain
                return STOP_CANCELLED

    # -- HTTP ----------------------------------------------------------------------------------
    async def _request(self, client: Any) -> _Reply:
        """One completion; returns as soon as the turn is cancelled, closing the response."""
        assert self._cancel_event is not None
        reply = _Reply()
        fetch = asyncio.ensure_future(self._fetch(client, reply))
        stop = asyncio.ensure_future(self._cancel_event.wait())
        try:
            await asyncio.wait({fetch, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not fetch.done():
                fetch.cancel()  # closes the response and its connection at once
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await fetch
                reply.cancelled = True
        if not reply.cancelled:
            fetch.result()  # raises ChatError
        return reply

    async def _fetch(self, client: Any, reply: _Reply) -> None:
        import httpx

        body: dict[str, Any] = {"model": self.model, "messages": self.messages,
                                "stream": self.stream}
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if self.use_tools:
            body["tools"] = TOOL_SPECS
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        url = f"{self.base_url}/chat/completions"
        self.requests_sent += 1
        try:
            async with client.stream("POST", url, json=body, headers=headers) as resp:
                if resp.status_code >= 400:
                    detail = (await resp.aread())[:500].decode("utf-8", errors="replace")
                    if self.use_tools and rejects_tools(resp.status_code, detail):
                        raise ToolsRejected(f"{url} answered HTTP {resp.status_code}: {detail}")
                    raise ChatError(f"{url} answered HTTP {resp.status_code}: {detail}")
                if not self.stream:
                    self._on_message(json.loads(await resp.aread()), reply)
                    return
                finished = False
                async for line in resp.aiter_lines():
                    if self.is_cancelled():  # between streamed chunks
                        reply.cancelled = True
                        return
                    # After [DONE] the body is read to its end rather than left: httpx's
                    # generators of a response left mid-iteration are finalised later by the
                    # garbage collector, in another task, which anyio reports as an error.
                    if finished or not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        finished = True
                        continue
                    self._on_chunk(json.loads(data), reply)
        except httpx.ConnectError as exc:
            raise ChatError(unreachable_next_step(url)) from exc
        except httpx.HTTPError as exc:
            raise ChatError(f"request to {url} failed: {exc or type(exc).__name__}") from exc
        except (ValueError, AttributeError, TypeError) as exc:
            raise ChatError(f"{url} sent a malformed reply: {exc}") from exc

    def _on_chunk(self, data: dict[str, Any], reply: _Reply) -> None:
        if data.get("error"):  # some servers report a failure inside the stream
            error = data["error"]
            raise ChatError(str(error.get("message", error) if isinstance(error, dict) else error))
        self._on_usage(data.get("usage"))
        for choice in data.get("choices") or ():
            delta = choice.get("delta") or {}
            self._on_text(delta, reply)
            for tc in delta.get("tool_calls") or ():
                slot = reply.calls.setdefault(int(tc.get("index", len(reply.calls))),
                                              {"id": "", "name": "", "arguments": ""})
                slot["id"] = slot["id"] or tc.get("id") or ""
                fn = tc.get("function") or {}
                slot["name"] = slot["name"] or fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
            reply.finish_reason = choice.get("finish_reason") or reply.finish_reason

    def _on_message(self, data: dict[str, Any], reply: _Reply) -> None:
        self._on_usage(data.get("usage"))
        for choice in (data.get("choices") or ())[:1]:
            message = choice.get("message") or {}
            self._on_text(message, reply)
            for n, tc in enumerate(message.get("tool_calls") or ()):
                fn = tc.get("function") or {}
                args = fn.get("arguments")
                reply.calls[n] = {"id": tc.get("id") or "", "name": fn.get("name") or "",
                                  "arguments": args if isinstance(args, str) else json.dumps(args)}
            reply.finish_reason = choice.get("finish_reason")

    def _on_text(self, part: dict[str, Any], reply: _Reply) -> None:
        thinking = part.get("reasoning_content") or part.get("reasoning")
        if isinstance(thinking, str) and thinking:
            self._emit(ThinkingDelta(self.stream_id, text=thinking))
        content = part.get("content")
        if isinstance(content, str) and content:
            reply.text += content
            self._emit(TextDelta(self.stream_id, text=content))

    def _on_usage(self, usage: object) -> None:
        """Each request of a tool loop reports its own usage; the run's ``Usage`` is the total
        so far (as the chat shows the latest one and a limit counts it). ``cost``: where the
        endpoint reports it in the usage (OpenRouter does, in US dollars)."""
        if isinstance(usage, dict):
            spent = self._spent
            spent.add(usage)
            self._emit(Usage(self.stream_id, input_tokens=spent.input_tokens,
                             output_tokens=spent.output_tokens, cost_usd=spent.cost_usd))

    # -- tools ---------------------------------------------------------------------------------
    async def _run_tools(self, calls: list[dict[str, Any]]) -> None:
        assert self._cancel_event is not None
        for n, call in enumerate(calls):
            if self.is_cancelled():  # mid-chain: answer the rest, run nothing more
                self._answer_all(calls[n:], CANCELLED_TOOL_RESULT)
                return
            fn = call["function"]
            try:
                args = json.loads(fn["arguments"] or "{}")
                if not isinstance(args, dict):
                    raise ValueError("not an object")
            except ValueError:
                self._answer(call, None, ToolResult("Error: the arguments are not a JSON object",
                                                    True))
                continue
            self._emit(ToolStart(self.stream_id, tool_id=call["id"], name=fn["name"], input=args))
            try:
                result = await self.toolbox.call(fn["name"], args, self.is_cancelled,
                                                 self._cancel_event)
            except Cancelled:
                result = ToolResult(CANCELLED_TOOL_RESULT, True)
            self._answer(call, args, result, started=True)

    def _answer_all(self, calls: list[dict[str, Any]], text: str) -> None:
        for call in calls:
            self._answer(call, None, ToolResult(text, True))

    def _answer(self, call: dict[str, Any], args: Any, result: ToolResult,
                started: bool = False) -> None:
        if not started:
            self._emit(ToolStart(self.stream_id, tool_id=call["id"], name=call["function"]["name"],
                                 input=args))
        output = self.redact(result.output)
        self._emit(ToolDone(self.stream_id, tool_id=call["id"], output=output,
                            is_error=result.is_error))
        self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})

    # -- misc ----------------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        """``text`` without the API key: for tool output, which goes back to the model too.
        Only the key: masking every secret-looking value of a file the model read would make
        it write the mask back into the file."""
        return hide_values(text, (self._api_key,)) if self._api_key else text

    def redact_for_user(self, text: str) -> str:
        """``text`` as the user may see it (errors, a command awaiting approval): the key and
        everything else tolaria/support/redact.py takes for a secret, masked."""
        return redact_text(self.redact(text))

    def _emit(self, event: Event) -> None:
        if self._on_event is not None:
            self._on_event(event)


class _Spent:
    """Tokens and cost of one prompt's requests, added up."""

    def __init__(self) -> None:
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cost_usd: float | None = None

    def add(self, usage: dict[str, Any]) -> None:
        self.input_tokens = _plus(self.input_tokens, usage.get("prompt_tokens"))
        self.output_tokens = _plus(self.output_tokens, usage.get("completion_tokens"))
        cost = usage.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.cost_usd = (self.cost_usd or 0.0) + float(cost)


def _plus(total: int | None, value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return total
    return (total or 0) + value
