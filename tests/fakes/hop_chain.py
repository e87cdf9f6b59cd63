"""A pid hopper that runs for minutes: ``python hop_chain.py LOG PIDFILE``.

Waits for SIGTERM; then becomes a fork-and-exit chain: every generation ``setsid()``s, forks
and exits at once, so one process is alive at any instant and a new pid appears every ~ms.
Started by tests/fakes/fake_agent.py (modes ``hopper_chain`` and ``hopper_chain_bare``, the
latter with an empty environment). Every generation appends its child's pid to LOG; PIDFILE gets the
first pid once the SIGTERM handler is in place. The LOG path is in every generation's command
line, so a test finds the chain by it (tests/helpers.py ``chain_alive``) whatever its pid.

Bounded on purpose, so a stop that fails cannot take the machine's pids (pid_max is 32,768
here): at most ``MAX_GENERATIONS`` generations and ``MAX_SECONDS`` from its start.
"""

from __future__ import annotations

import os
import signal
import sys
import time

MAX_GENERATIONS = 20_000
MAX_SECONDS = 180.0


def main() -> None:
    log, pidfile = sys.argv[1], sys.argv[2]
    start = time.monotonic()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def hop(signum: int, frame: object) -> None:
        """From the handler itself: the first fork follows the SIGTERM at once."""
        generation = 0
        while generation < MAX_GENERATIONS and time.monotonic() - start < MAX_SECONDS:
            child = os.fork()
            if child:  # noted by the parent: the child may be killed before it could write
                os.write(fd, f"{child}\n".encode())
                os._exit(0)
            os.setsid()
            generation += 1
        os._exit(0)

    signal.signal(signal.SIGTERM, hop)
    os.write(fd, f"{os.getpid()}\n".encode())
    with open(pidfile + ".tmp", "w") as fh:
        fh.write(f"{os.getpid()}\n")
    os.replace(pidfile + ".tmp", pidfile)
    while time.monotonic() - start < MAX_SECONDS:
        time.sleep(0.05)
    os._exit(0)


if __name__ == "__main__":
    main()
