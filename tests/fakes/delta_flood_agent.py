"""A fake Claude that streams its answer as partial-message deltas, as fast as the pipe takes
them: ``python tests/fakes/delta_flood_agent.py MODE [PROMPT]``.

Lines of the exact shape ``claude -p --output-format stream-json --verbose
--include-partial-messages`` prints (tests/fixtures/claude/claude_partial.jsonl): the init line,
``stream_event`` lines (``message_start``, ``content_block_delta`` text deltas, ...), the complete
``assistant`` message after its deltas, and a ``result`` line last.

- ``mixed``: ``FLOOD_DELTAS`` (default 20,000) deltas of the text ``texts(n)`` (non-ASCII, escapes,
  newlines; a few deltas in a shape the dialect's fast path does not take), a Bash tool call
  and its result, then as many deltas again of a second message, then the result.
- ``endless``: deltas ``<0> <1> <2> ...`` (ASCII) without end, until it is stopped.
"""

from __future__ import annotations

import json
import os
import sys
import uuid

SESSION = "fake-session"


def texts(n: int, start: int = 0) -> list[str]:
    """The text of deltas ``start`` .. ``start + n - 1`` of ``mixed``."""
    out = []
    for i in range(start, start + n):
        word = ("é→😀", 'a "quote" and a \\ backslash', "tab\there", "line\n", "plain")[i % 5]
        out.append(f"{i}:{word} ")
    return out


def line(obj: dict[str, object]) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def stream(event: dict[str, object], message: str, **extra: object) -> bytes:
    return line({"type": "stream_event", "event": event, "session_id": SESSION,
                 "parent_tool_use_id": None, "uuid": str(uuid.uuid4()), **extra,
                 "api_message_id": message})


def message(message_id: str, deltas: list[str]) -> bytes:
    out = [stream({"type": "message_start", "message": {"id": message_id, "type": "message",
                                                         "role": "assistant", "content": []}},
                  message_id),
           stream({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}, message_id)]
    for i, text in enumerate(deltas):
        delta = {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "text_delta", "text": text}}
        # Every 997th in a shape the fast path leaves to the JSON parser (a key it does not know).
        out.append(stream(delta, message_id, request_id="r") if i % 997 == 0
                   else stream(delta, message_id))
    out.append(line({"type": "assistant", "message": {
        "id": message_id, "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": "".join(deltas)}]},
        "parent_tool_use_id": None, "session_id": SESSION}))
    out.append(stream({"type": "content_block_stop", "index": 0}, message_id))
    out.append(stream({"type": "message_stop"}, message_id))
    return b"".join(out)


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "mixed"
    out = sys.stdout.buffer
    out.write(line({"type": "system", "subtype": "init", "session_id": SESSION,
                    "model": "fake-model", "tools": ["Bash"]}))
    if mode == "mixed":
        n = int(os.environ.get("FLOOD_DELTAS", "20000"))
        out.write(message("msg_1", texts(n)))
        out.write(line({"type": "assistant", "message": {
            "id": "msg_2", "type": "message", "role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                 "input": {"command": "ls -la"}}]},
            "parent_tool_use_id": None, "session_id": SESSION}))
        out.write(line({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt\nb.txt",
             "is_error": False}]}, "parent_tool_use_id": None, "session_id": SESSION}))
        out.write(message("msg_3", texts(n, start=n)))
        out.write(line({"type": "result", "subtype": "success", "is_error": False,
                        "result": "done", "session_id": SESSION, "total_cost_usd": 0.01,
                        "usage": {"input_tokens": 10, "output_tokens": 2 * n}}))
    elif mode == "endless":
        out.write(stream({"type": "message_start", "message": {"id": "msg_1"}}, "msg_1"))
        i = 0
        while True:
            block = []
            for _ in range(100):
                block.append(stream({"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": f"<{i}> "}},
                                    "msg_1"))
                i += 1
            out.write(b"".join(block))
            out.flush()
    else:
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return 64
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
