"""A fake agent that keeps spending: ``python tests/fakes/spend_agent.py [PROMPT]``.

It speaks opencode's ``run --format json`` (tolaria/core/runtimes/opencode.py): one model step
after another, each a ``step_start``, a ``text``, a finished ``tool_use`` and a ``step_finish``
reporting that step's tokens and cost, until ``SPEND_STEPS`` steps are done (default: a
thousand, i.e. until stopped). Before the first step it starts a ``sleep`` in a new session
(a tool out of reach of a signal to the agent's group), so a stop must kill the tree.

Knobs: ``SPEND_STEP_SECONDS`` (between steps, default 0.2), ``SPEND_INPUT_TOKENS`` /
``SPEND_OUTPUT_TOKENS`` (per step, default 100 / 50), ``SPEND_COST`` (USD per step, default
0.25; "none" reports no cost).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

SESSION = "ses_spend"


def emit(kind: str, part: dict[str, Any]) -> None:
    line = {"type": kind, "timestamp": int(time.time() * 1000), "sessionID": SESSION,
            "part": {"sessionID": SESSION, **part}}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def main() -> int:
    steps = int(os.environ.get("SPEND_STEPS", "1000"))
    pause = float(os.environ.get("SPEND_STEP_SECONDS", "0.2"))
    tokens_in = int(os.environ.get("SPEND_INPUT_TOKENS", "100"))
    tokens_out = int(os.environ.get("SPEND_OUTPUT_TOKENS", "50"))
    cost_text = os.environ.get("SPEND_COST", "0.25")
    cost = None if cost_text == "none" else float(cost_text)
    tool = subprocess.Popen(["sleep", "300"], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        for step in range(1, steps + 1):
            emit("step_start", {"type": "step-start"})
            emit("text", {"type": "text", "text": f"step {step}\n"})
            emit("tool_use", {"type": "tool", "tool": "bash", "callID": f"call_{step}",
                              "state": {"status": "completed", "input": {"command": "true"},
                                        "output": ""}})
            last = step == steps
            finish: dict[str, Any] = {"type": "step-finish",
                                      "reason": "stop" if last else "tool-calls",
                                      "tokens": {"input": tokens_in, "output": tokens_out}}
            if cost is not None:
                finish["cost"] = cost
            emit("step_finish", finish)
            if not last:
                time.sleep(pause)
    finally:
        tool.terminate()
        tool.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
