"""Put on PYTHONPATH, it holds a Python process before its first line of its own program runs
(before ``tolaria`` is even imported) until the file ``TOLARIA_TEST_GATE`` names exists: a
``tolaria run`` whose process exists but has not run a line of Tolaria yet, for as long as a
test needs (tests/cli/test_early_abort.py)."""

import os
import time

_gate = os.environ.get("TOLARIA_TEST_GATE")
if _gate:
    _deadline = time.monotonic() + 60
    while not os.path.exists(_gate) and time.monotonic() < _deadline:
        time.sleep(0.005)
