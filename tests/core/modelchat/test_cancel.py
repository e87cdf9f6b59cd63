"""CancellationToken: any thread, and another process (fork and spawn), in both directions."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator
from multiprocessing import resource_tracker
from multiprocessing.context import ForkContext, SpawnContext

import pytest

from tolaria.core.cancel import CancellationToken, Cancelled

START_METHODS = ["fork", "spawn"]


@pytest.fixture(scope="module", autouse=True)
def _resource_tracker() -> Iterator[None]:
    """'spawn' starts multiprocessing's resource tracker once and keeps it: start it before the
    per-test leak check looks, and end it with this module."""
    resource_tracker.ensure_running()
    yield
    resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]  # private, untyped


def context(method: str) -> ForkContext | SpawnContext:
    """The start method's context (only the concrete ones have a typed ``Process``)."""
    if method == "fork":
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _cancel_token(token: CancellationToken) -> None:
    token.cancel()


def _wait_for_cancel(token: CancellationToken) -> None:
    deadline = time.monotonic() + 10
    while not token.cancelled:
        if time.monotonic() > deadline:
            raise SystemExit(3)
        time.sleep(0.005)
    raise SystemExit(0)


def test_cancel_reset_and_raise() -> None:
    token = CancellationToken()
    assert not token.cancelled
    token.raise_if_cancelled()
    token.cancel()
    token.cancel()  # idempotent
    assert token.cancelled
    with pytest.raises(Cancelled):
        token.raise_if_cancelled()
    token.reset()
    assert not token.cancelled
    assert "cancelled=False" in repr(token)


def test_cancel_from_another_thread() -> None:
    token = CancellationToken()
    seen = threading.Event()

    def watch() -> None:
        while not token.cancelled:
            time.sleep(0.001)
        seen.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    threading.Thread(target=token.cancel).start()
    assert seen.wait(5)
    watcher.join(5)


@pytest.mark.parametrize("method", START_METHODS)
def test_cancelled_in_a_child_process_is_seen_by_the_parent(method: str) -> None:
    token = CancellationToken()
    child = context(method).Process(target=_cancel_token, args=(token,))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert token.cancelled


@pytest.mark.parametrize("method", START_METHODS)
def test_cancelled_in_the_parent_is_seen_by_a_child_process(method: str) -> None:
    token = CancellationToken()
    child = context(method).Process(target=_wait_for_cancel, args=(token,))
    child.start()
    time.sleep(0.2)
    assert child.is_alive()
    token.cancel()
    child.join(30)
    assert child.exitcode == 0


def test_reset_in_the_owner_reaches_the_child() -> None:
    token = CancellationToken()
    token.cancel()
    ctx = multiprocessing.get_context("spawn")
    token.reset()
    child = ctx.Process(target=_wait_for_cancel, args=(token,))
    child.start()
    time.sleep(0.2)
    assert child.is_alive()  # it saw the reset flag, not the earlier cancel
    token.cancel()
    child.join(30)
    assert child.exitcode == 0
