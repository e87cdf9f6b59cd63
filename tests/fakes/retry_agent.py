"""An agent that keeps retrying, like real CLIs facing an unreachable model.

``python tests/fakes/retry_agent.py FILE [--head N] [--stderr FILE] [--every S]
[--recover-after S --then FILE]``

First starts its "tool", a ``sleep 300`` in a new session (as the real CLIs run their shell tools,
out of the agent's process group), and writes the pids (agent, tool) to ``FAKE_PIDFILE`` if set.
Then prints FILE (a real captured stdout, e.g. tests/fixtures/codex/codex_unreach.jsonl) line by
line (only its first N lines with ``--head``), and the ``--stderr`` FILE to stderr, then repeats the retry line every S seconds (default
0.1) for ever: the last stdout line, or with ``--stderr`` the first stderr line (Gemini reports
its retries only on stderr). With ``--recover-after``, it stops retrying after that many seconds,
prints the ``--then`` FILE (a successful capture) and exits 0. Extra arguments are ignored.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # mypy knows this folder as ``fakes`` under tests/, the tests' import root
    from fakes import fake_agent as fa
else:
    import fake_agent as fa  # (this folder is on sys.path: the script's own)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--head", type=int)
    parser.add_argument("--stderr")
    parser.add_argument("--every", type=float, default=0.1)
    parser.add_argument("--recover-after", type=float)
    parser.add_argument("--then")
    args, _ = parser.parse_known_args(argv)
    tool = fa.start_session_tool()
    with open(args.file, encoding="utf-8") as fh:
        lines = fh.read().splitlines()[:args.head]
    for line in lines:
        print(line, flush=True)
    retry_out, retry_line = sys.stdout, lines[-1]
    if args.stderr:
        with open(args.stderr, encoding="utf-8") as fh:
            err_lines = fh.read().splitlines()
        for line in err_lines:
            print(line, file=sys.stderr, flush=True)
        retry_out, retry_line = sys.stderr, err_lines[0]
    started = time.monotonic()
    while args.recover_after is None or time.monotonic() - started < args.recover_after:
        time.sleep(args.every)
        print(retry_line, file=retry_out, flush=True)
    if args.then:
        with open(args.then, encoding="utf-8") as fh:
            for line in fh.read().splitlines():
                print(line, flush=True)
    tool.kill()
    tool.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
