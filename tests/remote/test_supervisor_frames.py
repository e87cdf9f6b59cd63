"""The supervisor's frames, spoken to it directly (no ssh): what arrives in the same read as
START - the prompt of an agent that reads it on stdin (Claude's stream input, ACP) - reaches the
agent. It was once dropped, and a real Claude Code on a host waited for its prompt forever."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tolaria.core.remote import supervisor as proto
from tolaria.core.stream_id import new_stream_id

#: The supervisor package run as a program (the host runs it the same way, from its bundle).
SUPERVISOR = [sys.executable, "-m", proto.__name__]


def test_stdin_sent_with_start_in_one_write_reaches_the_agent() -> None:
    start: dict[str, object] = {"argv": ["cat"], "cwd": None, "env": {}, "stream_id": new_stream_id(),
             "heartbeat_s": 10.0, "grace_s": 0.5}
    prompt = b'{"type":"user","message":{"content":"hello"}}\n'
    proc = subprocess.Popen(SUPERVISOR, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(proto.frame(proto.START, json.dumps(start).encode())
                         + proto.frame(proto.STDIN, prompt) + proto.frame(proto.STDIN_EOF))
        proc.stdin.flush()
        reader, out, gone = proto.FrameReader(), b"", None
        while gone is None:
            data = os.read(proc.stdout.fileno(), 65536)
            assert data, "the supervisor closed before GONE"
            for kind, payload in reader.feed(data):
                if kind == proto.STDOUT:
                    out += payload
                elif kind == proto.GONE:
                    gone = json.loads(payload)
        assert out == prompt
        assert gone["exit_code"] == 0 and gone["survivors"] == []
    finally:
        proc.stdin.close()
        proc.wait(10)
        proc.stdout.close()
