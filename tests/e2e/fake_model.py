"""A scripted fake model server on 127.0.0.1 that real coding-agent CLIs talk to.

One server speaks the four wire APIs the CLIs use, each streamed as server-sent events:

- Anthropic Messages (``POST /v1/messages``): Claude Code, claude-agent-acp;
- OpenAI Responses (``POST /v1/responses``): Codex;
- OpenAI Chat Completions (``POST /v1/chat/completions``): Qwen Code, opencode;
- Gemini (``POST /v1beta/models/<model>:streamGenerateContent`` and ``:generateContent``).

The script is chosen by a keyword in the latest user text, so a test picks the behaviour with its
prompt: ``E2E-ECHO`` asks for one shell call ``echo hi``; ``E2E-SLEEP`` asks for one shell call
``echo started; sleep 300; echo finished`` (to be stopped); ``E2E-WAIT`` one that ends by itself
after 8 s (``sleep 8``: something can be sent while it runs); ``E2E-MCP-MARK`` and
``E2E-MCP-SLEEP`` call the test MCP server's tool (``mark_and_sleep``, 0 or 300 s); anything
else gets a plain text answer.
Once a tool result comes back the model answers with text quoting it. A request without the good
key (``GOOD_KEY``) gets the API's own 401 error. The shell tool is found in the tools the CLI
offered (its name and argument schema differ per CLI), so the server follows the real CLI rather
than hard-coding it.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

GOOD_KEY = "tolaria-e2e-good-key"
TEXT_REPLY = "Hello from the fake model!"
ECHO_COMMAND = "echo hi"
SLEEP_COMMAND = "echo started; sleep 300; echo finished"
#: A tool that ends by itself after a while (a message can be sent while it runs).
WAIT_COMMAND = "echo started; sleep 8; echo finished"
#: The tool of the test MCP server (E2E-MCP-MARK: call it; E2E-MCP-SLEEP: call it to sleep 300 s).
MCP_TOOL = "mark_and_sleep"
#: How a Responses "namespace" tool (Codex: one per MCP server) and its function are joined here.
NAMESPACE_SEP = "::"
#: Shell tools of the CLIs we know, most specific first.
SHELL_TOOLS = ("Bash", "run_shell_command", "exec_command", "shell_command", "shell", "bash")


@dataclass
class Seen:
    api: str
    path: str
    body: dict[str, Any]
    authorised: bool


@dataclass
class Plan:
    """What the model does for one request."""

    text: str = ""
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)


#: Prompt tokens the fake model says it read from / wrote to its cache, per request
#: (Anthropic: beside ``input_tokens``; OpenAI Responses: part of ``input_tokens``).
CACHE_ANTHROPIC = {"cache_read_input_tokens": 30, "cache_creation_input_tokens": 5}
CACHED_OPENAI = 8

def _shell_args(schema: dict[str, Any], command: str) -> dict[str, Any]:
    props = (schema or {}).get("properties", {}) or {}
    required = (schema or {}).get("required", []) or []
    args: dict[str, Any] = {}
    for name in ("command", "cmd"):
        if name in props:
            kind = props[name].get("type")
            args[name] = ["bash", "-lc", command] if kind == "array" else command
            break
    else:
        args["command"] = command
    for name in required:
        if name in args:
            continue
        kind = (props.get(name) or {}).get("type")
        if name == "description":
            args[name] = "Run the command the user asked for"
        elif kind == "string":
            args[name] = ""
        elif kind == "boolean":
            args[name] = False
    return args


def plan(user_text: str, tool_result: str | None, tools: dict[str, dict[str, Any]]) -> Plan:
    if tool_result is not None:
        return Plan(text=f"The command printed: {tool_result.strip()[:200]}")
    mcp = max(user_text.rfind("E2E-MCP-SLEEP"), user_text.rfind("E2E-MCP-MARK"))
    if mcp >= 0 and mcp >= max(user_text.rfind(k) for k in ("E2E-ECHO", "E2E-SLEEP", "E2E-TEXT")):
        return _mcp_plan(user_text[mcp:].startswith("E2E-MCP-SLEEP"), tools)
    wanted = None
    last = max((user_text.rfind(k), k) for k in ("E2E-ECHO", "E2E-SLEEP", "E2E-WAIT", "E2E-TEXT"))
    if last[0] >= 0 and last[1] == "E2E-ECHO":
        wanted = ECHO_COMMAND
    elif last[0] >= 0 and last[1] == "E2E-SLEEP":
        wanted = SLEEP_COMMAND
    elif last[0] >= 0 and last[1] == "E2E-WAIT":
        wanted = WAIT_COMMAND
    if wanted is None:
        return Plan(text=TEXT_REPLY)
    for name in SHELL_TOOLS:
        if name in tools:
            return Plan(text="I'll run it.", tool=name, args=_shell_args(tools[name], wanted))
    return Plan(text=f"No shell tool was offered (tools: {', '.join(sorted(tools)) or 'none'})")


def _mcp_plan(sleep: bool, tools: dict[str, dict[str, Any]]) -> Plan:
    """Call the test MCP server's tool (tests/fakes/mcp_probe_server.py), by whatever name the
    CLI gave it (Claude ``mcp__probe__mark_and_sleep``, Codex and Gemini their own spelling)."""
    for name in sorted(tools):
        if name.endswith(MCP_TOOL):
            return Plan(text="I'll call the probe.", tool=name,
                        args={"seconds": 300.0 if sleep else 0.0})
    return Plan(text=f"No MCP probe tool was offered (tools: {', '.join(sorted(tools)) or 'none'})")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c) for c in content)
    if isinstance(content, dict):
        for key in ("text", "content", "output"):
            if key in content and content.get("type") not in ("tool_result",):
                return _text_of(content[key])
    return ""


# -- per-API readers: (user text, tool result or None, tools by name) -----------------------------

def read_anthropic(body: dict[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    tools = {t["name"]: t.get("input_schema", {}) for t in body.get("tools", []) if "name" in t}
    messages = [m for m in body.get("messages", []) if m.get("role") == "user"]
    text = "\n".join(_text_of(m.get("content")) for m in messages)
    result = None
    last = body.get("messages", [])[-1:] or [{}]
    content = last[0].get("content")
    if last[0].get("role") == "user" and isinstance(content, list):
        outs = [c for c in content if isinstance(c, dict) and c.get("type") == "tool_result"]
        if outs:
            result = "\n".join(_plain(o.get("content")) for o in outs)
    return text, result, tools


def _plain(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_plain(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)
    return str(content or "")


def read_responses(body: dict[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    tools = {t["name"]: t.get("parameters", {}) for t in body.get("tools", [])
             if "name" in t and t.get("type") != "namespace"}
    for group in body.get("tools", []):
        if group.get("type") == "namespace":  # Codex's MCP tools: one namespace per server
            for t in group.get("tools", []):
                tools[f"{group['name']}{NAMESPACE_SEP}{t['name']}"] = t.get("parameters", {})
    items = body.get("input", [])
    if isinstance(items, str):
        return items, None, tools
    text = "\n".join(_text_of(i.get("content")) for i in items
                     if isinstance(i, dict) and i.get("role") == "user")
    result = None
    if items and isinstance(items[-1], dict) and items[-1].get("type", "").endswith("call_output"):
        result = _plain(items[-1].get("output"))
    return text, result, tools


def read_chat(body: dict[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    tools = {t["function"]["name"]: t["function"].get("parameters", {})
             for t in body.get("tools", []) if "function" in t}
    messages = body.get("messages", [])
    text = "\n".join(_text_of(m.get("content")) for m in messages if m.get("role") == "user")
    result = None
    if messages and messages[-1].get("role") == "tool":
        result = _plain(messages[-1].get("content"))
    return text, result, tools


def read_gemini(body: dict[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    tools: dict[str, Any] = {}
    for group in body.get("tools", []) or []:
        for decl in group.get("functionDeclarations", []) or []:
            tools[decl["name"]] = decl.get("parameters") or decl.get("parametersJsonSchema") or {}
    contents = body.get("contents", [])
    text = "\n".join(p.get("text", "") for c in contents if c.get("role") == "user"
                     for p in c.get("parts", []) if isinstance(p, dict))
    result = None
    parts = contents[-1].get("parts", []) if contents else []
    responses = [p["functionResponse"] for p in parts if isinstance(p, dict) and "functionResponse" in p]
    if responses:
        result = "\n".join(json.dumps(r.get("response", {})) for r in responses)
    return text, result, tools


class FakeModelServer:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self, api: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.api == api]

    def start(self) -> FakeModelServer:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)


def _handler(owner: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        # -- plumbing ------------------------------------------------------------------------
        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse_start(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

        def _sse(self, data: Any, event: str | None = None) -> None:
            head = f"event: {event}\n" if event else ""
            payload = data if isinstance(data, str) else json.dumps(data)
            self.wfile.write(f"{head}data: {payload}\n\n".encode())
            self.wfile.flush()

        def _key(self) -> str:
            auth = self.headers.get("Authorization", "")
            query = parse_qs(urlsplit(self.path).query)
            return (self.headers.get("x-api-key") or self.headers.get("x-goog-api-key")
                    or (auth[7:] if auth.lower().startswith("bearer ") else "")
                    or (query.get("key") or [""])[0])

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path.endswith("/models"):
                self._json(200, {"object": "list", "data": [
                    {"id": "fake-model", "object": "model", "owned_by": "tolaria"}]})
            else:
                self._json(404, {"error": {"message": f"no such path {path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0) or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            path = urlsplit(self.path).path
            ok = self._key() == GOOD_KEY
            try:
                if path.endswith("/messages/count_tokens"):
                    self._json(200, {"input_tokens": 42})
                elif path.endswith("/messages"):
                    owner.record(Seen("anthropic", path, body, ok))
                    self._anthropic(body, ok)
                elif path.endswith("/responses"):
                    owner.record(Seen("responses", path, body, ok))
                    self._responses(body, ok)
                elif path.endswith("/chat/completions"):
                    owner.record(Seen("chat", path, body, ok))
                    self._chat(body, ok)
                elif ":countTokens" in path:
                    self._json(200, {"totalTokens": 42})
                elif ":generateContent" in path or ":streamGenerateContent" in path:
                    owner.record(Seen("gemini", path, body, ok))
                    self._gemini(body, ok, stream=":stream" in path)
                else:
                    self._json(404, {"error": {"message": f"no such path {path}"}})
            except (BrokenPipeError, ConnectionResetError):
                pass

        # -- Anthropic Messages ----------------------------------------------------------------
        def _anthropic(self, body: dict[str, Any], ok: bool) -> None:
            if not ok:
                self._json(401, {"type": "error", "error": {
                    "type": "authentication_error", "message": "invalid x-api-key (fake)"}})
                return
            p = plan(*read_anthropic(body))
            mid = f"msg_fake_{uuid.uuid4().hex[:12]}"
            blocks: list[dict[str, Any]] = [{"type": "text", "text": p.text}]
            if p.tool:
                blocks.append({"type": "tool_use", "id": f"toolu_fake_{uuid.uuid4().hex[:12]}",
                               "name": p.tool, "input": p.args})
            stop = "tool_use" if p.tool else "end_turn"
            # cache figures as Anthropic reports them (beside input_tokens): the usage totals'
            # cache columns (tests/e2e/test_real_usage.py)
            usage = {"input_tokens": 12, "output_tokens": 7, **CACHE_ANTHROPIC}
            if not body.get("stream"):
                self._json(200, {"id": mid, "type": "message", "role": "assistant",
                                 "model": body.get("model", "fake"), "content": blocks,
                                 "stop_reason": stop, "stop_sequence": None, "usage": usage})
                return
            self._sse_start()
            self._sse({"type": "message_start", "message": {
                "id": mid, "type": "message", "role": "assistant", "model": body.get("model", "fake"),
                "content": [], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 1, **CACHE_ANTHROPIC}}},
                "message_start")
            for i, block in enumerate(blocks):
                if block["type"] == "text":
                    self._sse({"type": "content_block_start", "index": i,
                               "content_block": {"type": "text", "text": ""}}, "content_block_start")
                    for piece in _pieces(block["text"]):
                        self._sse({"type": "content_block_delta", "index": i,
                                   "delta": {"type": "text_delta", "text": piece}},
                                  "content_block_delta")
                else:
                    self._sse({"type": "content_block_start", "index": i, "content_block": {
                        "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}},
                        "content_block_start")
                    self._sse({"type": "content_block_delta", "index": i, "delta": {
                        "type": "input_json_delta", "partial_json": json.dumps(block["input"])}},
                        "content_block_delta")
                self._sse({"type": "content_block_stop", "index": i}, "content_block_stop")
            self._sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                       "usage": {"output_tokens": 7}}, "message_delta")
            self._sse({"type": "message_stop"}, "message_stop")

        # -- OpenAI Responses ------------------------------------------------------------------
        def _responses(self, body: dict[str, Any], ok: bool) -> None:
            if not ok:
                self._json(401, {"error": {"message": "Incorrect API key provided (fake)",
                                           "type": "invalid_request_error",
                                           "code": "invalid_api_key"}})
                return
            p = plan(*read_responses(body))
            rid = f"resp_fake_{uuid.uuid4().hex[:12]}"
            base = {"id": rid, "object": "response", "model": body.get("model", "fake"),
                    "status": "in_progress", "output": []}
            self._sse_start()
            self._sse({"type": "response.created", "response": base}, "response.created")
            output: list[dict[str, Any]] = []
            mid = f"msg_fake_{uuid.uuid4().hex[:12]}"
            message = {"type": "message", "id": mid, "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": p.text, "annotations": []}]}
            self._sse({"type": "response.output_item.added", "output_index": 0,
                       "item": {**message, "status": "in_progress", "content": []}},
                      "response.output_item.added")
            for piece in _pieces(p.text):
                self._sse({"type": "response.output_text.delta", "item_id": mid, "output_index": 0,
                           "content_index": 0, "delta": piece}, "response.output_text.delta")
            self._sse({"type": "response.output_item.done", "output_index": 0, "item": message},
                      "response.output_item.done")
            output.append(message)
            if p.tool:
                namespace, _, name = p.tool.rpartition(NAMESPACE_SEP)
                call = {"type": "function_call", "id": f"fc_fake_{uuid.uuid4().hex[:12]}",
                        "call_id": f"call_fake_{uuid.uuid4().hex[:12]}", "name": name,
                        "arguments": json.dumps(p.args), "status": "completed",
                        **({"namespace": namespace} if namespace else {})}
                self._sse({"type": "response.output_item.added", "output_index": 1,
                           "item": {**call, "arguments": "", "status": "in_progress"}},
                          "response.output_item.added")
                self._sse({"type": "response.output_item.done", "output_index": 1, "item": call},
                          "response.output_item.done")
                output.append(call)
            usage = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": CACHED_OPENAI},
                     "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": 19}
            self._sse({"type": "response.completed", "response": {
                **base, "status": "completed", "output": output, "usage": usage}},
                "response.completed")

        # -- OpenAI Chat Completions -----------------------------------------------------------
        def _chat(self, body: dict[str, Any], ok: bool) -> None:
            if not ok:
                self._json(401, {"error": {"message": "Incorrect API key provided (fake)",
                                           "type": "invalid_request_error",
                                           "code": "invalid_api_key"}})
                return
            p = plan(*read_chat(body))
            cid = f"chatcmpl-fake{uuid.uuid4().hex[:10]}"
            model = body.get("model", "fake-model")

            def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
                return {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

            finish = "tool_calls" if p.tool else "stop"
            usage = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
            if not body.get("stream"):
                message: dict[str, Any] = {"role": "assistant", "content": p.text}
                if p.tool:
                    message["tool_calls"] = [{"id": "call_fake_1", "type": "function", "function": {
                        "name": p.tool, "arguments": json.dumps(p.args)}}]
                self._json(200, {"id": cid, "object": "chat.completion", "created": 0,
                                 "model": model, "usage": usage, "choices": [
                                     {"index": 0, "message": message, "finish_reason": finish}]})
                return
            self._sse_start()
            self._sse(chunk({"role": "assistant", "content": ""}))
            for piece in _pieces(p.text):
                self._sse(chunk({"content": piece}))
            if p.tool:
                self._sse(chunk({"tool_calls": [{"index": 0, "id": f"call_fake_{uuid.uuid4().hex[:8]}",
                                                 "type": "function", "function": {
                                                     "name": p.tool,
                                                     "arguments": json.dumps(p.args)}}]}))
            self._sse(chunk({}, finish))
            self._sse({"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                       "choices": [], "usage": usage})
            self._sse("[DONE]")

        # -- Gemini ------------------------------------------------------------------------------
        def _gemini(self, body: dict[str, Any], ok: bool, stream: bool) -> None:
            if not ok:
                self._json(401, {"error": {"code": 401, "message": "API key not valid (fake)",
                                           "status": "UNAUTHENTICATED"}})
                return
            user_text, result, tools = read_gemini(body)
            usage = {"promptTokenCount": 12, "candidatesTokenCount": 7, "totalTokenCount": 19}
            if not tools and not stream:
                # The CLI's model router (or another side request) asking for JSON: answer a
                # route choice it accepts; plain text for anything else.
                text = json.dumps({"reasoning": "simple request", "model_choice": "flash",
                                   "complexity_reasoning": "simple request",
                                   "complexity_score": 10})
                self._json(200, {"candidates": [{"content": {"role": "model", "parts": [
                    {"text": text}]}, "finishReason": "STOP", "index": 0}], "usageMetadata": usage})
                return
            p = plan(user_text, result, tools)
            parts: list[dict[str, Any]] = [{"text": p.text}]
            if p.tool:
                parts.append({"functionCall": {"name": p.tool, "args": p.args}})
            if not stream:
                self._json(200, {"candidates": [{"content": {"role": "model", "parts": parts},
                                                 "finishReason": "STOP", "index": 0}],
                                 "usageMetadata": usage})
                return
            self._sse_start()
            pieces = _pieces(p.text)
            for n, piece in enumerate(pieces):
                last = n == len(pieces) - 1 and not p.tool
                cand: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": piece}]},
                                        "index": 0}
                if last:
                    cand["finishReason"] = "STOP"
                self._sse({"candidates": [cand], **({"usageMetadata": usage} if last else {})})
            if p.tool:
                self._sse({"candidates": [{"content": {"role": "model", "parts": [parts[-1]]},
                                           "finishReason": "STOP", "index": 0}],
                           "usageMetadata": usage})

    return Handler


def _pieces(text: str, n: int = 3) -> list[str]:
    if not text:
        return [""]
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]



def images_in(body: Any) -> list[bytes]:
    """Every image a model request carries, decoded, whatever the wire API: Anthropic ``image``
    blocks (``source.data``), Responses ``input_image`` and Chat ``image_url`` data URLs, Gemini
    ``inlineData``. So a test asserts that an attachment's very bytes reached the model."""
    import base64

    found: list[bytes] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            source = node.get("source")
            if node.get("type") == "image" and isinstance(source, dict) and "data" in source:
                found.append(base64.b64decode(source["data"]))
            inline = node.get("inlineData") or node.get("inline_data")
            if isinstance(inline, dict) and str(inline.get("mimeType", "")).startswith("image/"):
                found.append(base64.b64decode(inline.get("data", "")))
            for key in ("image_url", "url"):
                url = node.get(key)
                if isinstance(url, dict):
                    url = url.get("url")
                if isinstance(url, str) and url.startswith("data:image/") and ";base64," in url:
                    found.append(base64.b64decode(url.split(";base64,", 1)[1]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body)
    return found
