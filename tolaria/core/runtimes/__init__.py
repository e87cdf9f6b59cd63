"""Runtimes turn an agent's stdout lines into core events.

A runtime is a small stateful parser, one per run: ``feed(line)`` returns the events of one
stdout line, ``outcome()`` says how the turn ended according to the protocol (``None`` when the
agent never said). The runner decides the final status from that and from whether a stop was
requested; exit codes alone are never trusted.
"""

from __future__ import annotations

from tolaria.core.runtimes.base import Outcome, Runtime
from tolaria.core.runtimes.claude import ClaudeStreamJson
from tolaria.core.runtimes.codex import CodexExecJson
from tolaria.core.runtimes.cursor import CursorStreamJson
from tolaria.core.runtimes.gemini import GeminiStreamJson
from tolaria.core.runtimes.lines import PlainLines
from tolaria.core.runtimes.opencode import OpencodeJson
from tolaria.core.runtimes.pi import PiJson
from tolaria.core.runtimes.qwen import QwenStreamJson

RUNTIMES: dict[str, type[Runtime]] = {
    "lines": PlainLines,
    "claude-stream-json": ClaudeStreamJson,
    "qwen-stream-json": QwenStreamJson,
    "codex-exec-json": CodexExecJson,
    "gemini-stream-json": GeminiStreamJson,
    "opencode-json": OpencodeJson,
    "cursor-stream-json": CursorStreamJson,
    "pi-json": PiJson,
}


def make_runtime(protocol: str, stream_id: str, agent: str) -> Runtime:
    try:
        cls = RUNTIMES[protocol]
    except KeyError:
        raise ValueError(f"no runtime for protocol {protocol!r}") from None
    return cls(stream_id=stream_id, agent=agent)


__all__ = ["RUNTIMES", "Outcome", "Runtime", "make_runtime"]
