"""The "Test" button of an agent: is it installed, which version, and does one tiny turn work?

The turn is a real run through :func:`tolaria.core.turns.runner.stream_ai_agent` (registered, stoppable,
its whole process tree ended), with the agent's overrides applied, so a success here means a chat
would start; a failure shows the agent's own error text.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from tolaria.config.overrides import (
    AgentOverrides,
    AgentSettingsError,
    apply_overrides,
)
from tolaria.core.adapters.manifest import OPENAI_CHAT, Manifest
from tolaria.core.events import STOP_END_TURN, Diagnostic, Error, Event, TextDelta
from tolaria.core.process.registry import ProcessRegistry, default_registry
from tolaria.core.programs import discovery
from tolaria.core.remote.hosts import Target
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, abort_ai_agent_stream, stream_ai_agent

TEST_PROMPT = "Reply with OK"
_MAX_TEXT = 2000


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest test class

    ok: bool
    #: The version line the agent printed, if it has a version command.
    version: str | None
    #: One sentence: what happened.
    message: str
    #: The exact error text (the run's Error events, the probe's output), or the answer.
    detail: str = ""


async def test_agent(manifest: Manifest, o: AgentOverrides, cwd: str,
                     timeout: float = 60,  # noqa: PT028 (not a pytest test)
                     *, registry: ProcessRegistry | None = None,  # noqa: PT028
                     grace_s: float = 2.0,  # noqa: PT028
                     target: Target | None = None) -> TestResult:  # noqa: PT028
    """Version probe, then a tiny real turn; never raises for a failing agent. With
    ``target`` both happen on that host: the agent found there as a run there finds it
    (``core/remote/discover``), the turn run through the remote launch in the host's home."""
    try:
        applied = apply_overrides(manifest, o)
    except AgentSettingsError as exc:
        return TestResult(False, None, "the agent's settings cannot be applied", str(exc))
    if target is not None and applied.protocol != OPENAI_CHAT:
        from tolaria.core.remote.discover import discover

        there = await discover(target, [applied], timeout=min(timeout, 30.0))
        if there.error:
            return TestResult(False, None, there.error)
        found = there.get(applied.id)
        if found is None or found.path is None:
            return TestResult(False, None, f"{applied.name} is not installed on {target.label}",
                              found.error if found and found.error else "")
        detection = found
        cwd = ""  # the host's home
    else:
        target = None  # a model endpoint is reached from this computer
        detection = await discovery.detect(applied,
                                           timeout=min(timeout, discovery.PROBE_TIMEOUT_S))
    if applied.protocol != OPENAI_CHAT and detection.path is None:
        return TestResult(False, None, f"{applied.name} is not installed",
                          detection.error or "")
    notes = [f"version check: {detection.error}"] if detection.error else []
    result = await _turn(applied, o, cwd, timeout, registry or default_registry(), grace_s,
                         target)
    detail = "\n".join([*notes, result.detail]) if notes else result.detail
    return TestResult(result.ok, detection.version, result.message, detail.strip())


test_agent.__test__ = False  # type: ignore[attr-defined]  # pytest: not a test


async def _turn(manifest: Manifest, o: AgentOverrides, cwd: str, timeout: float,
                registry: ProcessRegistry, grace_s: float,
                target: Target | None = None) -> TestResult:
    errors: list[str] = []
    diagnostics: list[str] = []
    text: list[str] = []

    def on_event(event: Event) -> None:
        if isinstance(event, Error):
            errors.append(event.message)
        elif isinstance(event, Diagnostic) and event.message:
            diagnostics.append(event.message)
        elif isinstance(event, TextDelta):
            text.append(event.text)

    request = RunRequest(manifest=manifest, prompt=TEST_PROMPT, cwd=cwd,
                         permission_mode=o.permission_mode, model=o.model, target=target)
    stream_id = new_stream_id()
    task = asyncio.ensure_future(stream_ai_agent(request, stream_id, on_event, registry=registry,
                                                 grace_s=grace_s))
    timed_out = False
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            timed_out = True
            abort_ai_agent_stream(stream_id, registry)
        outcome = await task
    except asyncio.CancelledError:
        # The dialog went away: stop the run (its tree included) before giving up.
        abort_ai_agent_stream(stream_id, registry)
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise
    answer = "".join(text).strip()[:_MAX_TEXT]
    if timed_out:
        return TestResult(False, None, f"no answer within {timeout:g} s; the test run was "
                                       "stopped", "\n".join(errors or diagnostics[-5:]))
    if outcome.stop_reason == STOP_END_TURN and not errors:
        return TestResult(True, None, f"{manifest.name} answered", answer)
    message = errors[0].splitlines()[0] if errors else f"the turn ended: {outcome.stop_reason}"
    detail = "\n".join(errors) if errors else "\n".join(diagnostics[-5:])
    return TestResult(False, None, message, detail)
