"""A slow streaming agent for crash tests: ``python tests/fakes/tick_agent.py PROMPT``.

Starts a tool (``sleep 300`` in a new session, as real CLIs run their shell tools; its pid goes
to ``FAKE_PIDFILE`` if set), then prints ``tick N <unix time>`` every ``TICK_MS`` milliseconds
(default 5), flushed, forever. The timestamps let a test tell which lines the agent had printed
before a given moment (for the ``lines`` protocol: each line is one text event).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main() -> int:
    tool = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, start_new_session=True)
    pidfile = os.environ.get("FAKE_PIDFILE")
    if pidfile:
        with open(pidfile + ".tmp", "w") as fh:
            fh.write(f"{tool.pid}\n")
        os.replace(pidfile + ".tmp", pidfile)
    interval = float(os.environ.get("TICK_MS", "5")) / 1000
    i = 0
    while True:
        i += 1
        sys.stdout.write(f"tick {i} {time.time():.6f}\n")
        sys.stdout.flush()
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
