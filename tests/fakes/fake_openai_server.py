"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, owned by a test.

Each POST to ``/v1/chat/completions`` takes the next scripted ``Reply`` and streams it as
server-sent events (``data: {...}\\n\\n`` ... ``data: [DONE]\\n\\n``), or as one JSON body when
the request has ``stream: false``. Requests (body and headers) are recorded, and so is the moment
the client closed a response the server was still streaming. A reply with ``status >= 400`` and a
``body`` is sent as that JSON error body (what servers answer before any stream starts).

``GET /v1/models`` answers ``{"object": "list", "data": [{"id": ...}]}`` from ``models``, or the
scripted ``models_status``/``models_raw`` (an error, or a body that is not JSON); those requests go
to ``model_requests`` so ``requests`` stays the list of chat completions.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    chunks: list[dict[str, Any]]
    #: Pause before each chunk (a slow model).
    delay: float = 0.0
    status: int = 200
    #: With ``status >= 400``: the JSON error body sent instead of a stream.
    body: dict[str, Any] | None = None


def tools_unsupported_reply(model: str = "fake-model") -> Reply:
    """What Ollama answers a request with ``tools`` for a model whose template has none."""
    return Reply([], status=400, body={"error": {
        "message": f"registry.ollama.ai/library/{model}:latest does not support tools",
        "type": "api_error", "param": None, "code": None}})


def text_reply(text: str, pieces: int = 3, delay: float = 0.0,
               usage: tuple[int, int] | None = (7, 11)) -> Reply:
    size = max(1, -(-len(text) // pieces))
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text[i:i + size]},
                      "finish_reason": None}]}
        for i in range(0, len(text), size)]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage:
        chunks.append({"choices": [], "usage": {"prompt_tokens": usage[0],
                                                "completion_tokens": usage[1]}})
    return Reply(chunks, delay=delay)


def tool_reply(*calls: tuple[str, str, dict[str, Any]], text: str = "") -> Reply:
    """One assistant message asking for ``(id, name, arguments)`` calls; arguments are split
    over two chunks, as real servers do."""
    chunks: list[dict[str, Any]] = []
    if text:
        chunks.append({"choices": [{"index": 0, "delta": {"content": text}}]})
    for n, (call_id, name, args) in enumerate(calls):
        raw = json.dumps(args)
        half = len(raw) // 2
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": n, "id": call_id, "type": "function",
             "function": {"name": name, "arguments": raw[:half]}}]}}]})
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": n, "function": {"arguments": raw[half:]}}]}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return Reply(chunks)


@dataclass
class Request:
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class FakeOpenAIServer:
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Request] = field(default_factory=list)
    #: ``GET /models``: the ids listed, or this status / raw body instead.
    models: list[str] = field(default_factory=lambda: ["fake-model"])
    models_status: int = 200
    models_raw: bytes | None = None
    model_requests: list[Request] = field(default_factory=list)
    #: time.monotonic() when a write failed because the client had closed the response.
    client_closed_at: float | None = None
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeOpenAIServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner.model_requests.append(
                    Request({}, {k.lower(): v for k, v in self.headers.items()}))
                if not self.path.rstrip("/").endswith("/models"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                elif owner.models_raw is not None:
                    self._send(owner.models_status, owner.models_raw, "text/html")
                elif owner.models_status >= 400:
                    self._send(owner.models_status,
                               b'{"error": {"message": "Incorrect API key provided"}}')
                else:
                    data = [{"id": m, "object": "model", "owned_by": "fake"} for m in owner.models]
                    self._send(200, json.dumps({"object": "list", "data": data}).encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append(Request(body, {k.lower(): v for k, v in self.headers.items()}))
                if not self.path.endswith("/chat/completions") or not owner.replies:
                    self._send(500, b'{"error": {"message": "no scripted reply"}}')
                    return
                reply = owner.replies.popleft()
                if reply.status >= 400 and reply.body is not None:
                    self._send(reply.status, json.dumps(reply.body).encode())
                    return
                if not body.get("stream"):
                    self._send(reply.status, json.dumps(_as_message(reply)).encode())
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for chunk in reply.chunks:
                        if reply.delay and owner._stopping.wait(reply.delay):
                            return
                        self._event(json.dumps(chunk))
                    self._event("[DONE]")
                except (BrokenPipeError, ConnectionResetError):
                    owner.client_closed_at = time.monotonic()

            def _event(self, data: str) -> None:
                self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()

            def _send(self, status: int, payload: bytes,
                      content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)


def _as_message(reply: Reply) -> dict[str, Any]:
    """The non-streaming form of a scripted reply."""
    calls: dict[int, dict[str, Any]] = {}
    text, finish, usage = "", "stop", None
    for chunk in reply.chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices", []):
            delta = choice.get("delta", {})
            text += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], {"id": "", "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function", {})
                slot["function"]["name"] = fn.get("name") or slot["function"]["name"]
                slot["function"]["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [calls[k] for k in sorted(calls)]
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage}
