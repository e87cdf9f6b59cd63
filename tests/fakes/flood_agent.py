"""A fake agent that floods one channel: ``python tests/fakes/flood_agent.py MODE [PROMPT]``.

Claude stream-json (through tests/fakes/fake_agent.py's helpers), session ``fake-session``:

- ``text``: ``FLOOD_CHARS`` characters of answer text in ~1 KB deltas (0: without end, until
  stopped), then ``the end``; every 64 KB it names how far it got (``[at N]``).
- ``tool``: a tool call whose result is ``FLOOD_CHARS`` characters (``HEAD…`` first, ``…TAIL``
  last), then the text ``after the tool``.
- ``stderr``: ``FLOOD_CHARS`` characters of stderr in 100-character lines, then ``the end``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # mypy knows this folder as ``fakes`` under tests/, the tests' import root
    from fakes import fake_agent as fa
else:
    import fake_agent as fa  # (this folder is on sys.path: the script's own)


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "text"
    total = int(os.environ.get("FLOOD_CHARS", "1000000"))
    fa.init()
    if mode == "text":
        line = "lorem ipsum dolor sit amet " * 38 + "\n"  # 1,027 characters
        sent = 0
        mark = 0
        while total == 0 or sent < total:
            if sent >= mark:
                fa.text(f"[at {sent}]\n")
                mark += 64 * 1024
            fa.text(line)
            sent += len(line)
        fa.text("the end")
    elif mode == "tool":
        fa.tool_use("toolu_flood", "cat huge.log")
        body = "HEAD" + "x" * max(0, total - 8) + "TAIL"
        fa.tool_result("toolu_flood", body)
        fa.text("after the tool", "msg_fake_2")
    elif mode == "stderr":
        raw = ("e" * 99 + "\n").encode()
        for _ in range(max(1, total // 100)):
            sys.stderr.buffer.write(raw)
        sys.stderr.buffer.flush()
        fa.text("the end")
    else:
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return fa.EX_USAGE
    fa.result("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
