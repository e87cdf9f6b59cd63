"""A run's errors and stderr lines reach the chat (and the store) without secrets.

A real agent process prints the shared table (tests/redact_cases.py) on its stderr and fails; the
stderr diagnostics and the error built from its stderr tail are masked by the one secret policy
(tolaria/support/redact.py, applied to every event the runner delivers). The conversation
itself is not touched: that is the agent's work, and masking it would corrupt files it writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import async_test, start_run
from redact_cases import ENV, HARMLESS, LEAKS

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import Diagnostic, Error, TextDelta

#: Prints its prompt on stdout as plain lines, then on stderr line by line, then fails.
LEAKY_AGENT = """\
import sys
print(sys.argv[1], flush=True)
for line in sys.argv[1].splitlines():
    print(line, file=sys.stderr, flush=True)
sys.exit(3)
"""


@async_test
async def test_stderr_lines_and_the_error_are_masked_the_conversation_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    manifest = Manifest(id="leaky", name="Leaky agent", protocol="lines",
                        command=(sys.executable, "-c", LEAKY_AGENT, "{prompt}"))
    leaks = [leak.text for leak in LEAKS]
    # The error keeps the stderr tail (its last lines): the harmless text and the measured leaks.
    prompt = "\n".join([*leaks, *HARMLESS, *(leak.text for leak in LEAKS[:2])])
    run = start_run(manifest, prompt, cwd=tmp_path)
    done = await run.finish()
    assert done.stop_reason == "error"
    stderr = [e.message for e in run.collector.events
              if isinstance(e, Diagnostic) and e.source == "stderr"]
    [error] = [e for e in run.collector.events if isinstance(e, Error)]
    assert len(stderr) == len(prompt.splitlines())
    for leak, line in zip(LEAKS, stderr, strict=False):
        assert leak.secret not in line and leak.kept in line, (leak, line)
    assert stderr[len(LEAKS):len(LEAKS) + len(HARMLESS)] == list(HARMLESS)
    for leak in LEAKS:
        assert leak.secret not in error.message, leak
    assert "export GH_PAT=***" in error.message and "using key *** now" in error.message
    assert all(harmless in error.message for harmless in HARMLESS)
    text = "".join(e.text for e in run.collector.events if isinstance(e, TextDelta))
    assert "hunter2hunter2" in text  # the agent's own answer is shown as it is


@async_test
async def test_a_secret_given_to_the_agent_only_is_masked_too(tmp_path: Path) -> None:
    """A value set in the agent's [env] or in Preferences is in no environment of Tolaria's own,
    yet the agent may print it: it is masked once the run's environment is built."""
    secret = "given-to-the-agent-only-77"
    script = ("import os, sys; print('auth with ' + os.environ['AGENT_ONLY_SECRET'], "
              "file=sys.stderr); sys.exit(3)")
    manifest = Manifest(id="leaky", name="Leaky agent", protocol="lines",
                        command=(sys.executable, "-c", script, "{prompt}"))
    run = start_run(manifest, "hi", cwd=tmp_path, env={"AGENT_ONLY_SECRET": secret})
    done = await run.finish()
    assert done.stop_reason == "error"
    shown = [e.message for e in run.collector.events if isinstance(e, Diagnostic | Error)]
    assert "auth with ***" in shown and secret not in repr(run.collector.events)
