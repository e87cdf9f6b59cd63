"""Local model servers are probed for liveness (a short TCP connect, cached) instead of being
called "available" with nothing listening (issue 17, item 4)."""

from __future__ import annotations

import socket
import time

from helpers import async_test

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.modelchat.client import unreachable_next_step
from tolaria.core.programs import discovery


def _manifest(manifest_id: str, port: int, host: str = "127.0.0.1") -> Manifest:
    return Manifest(id=manifest_id, name="Local", protocol="openai-chat", command=(),
                    base_url=f"http://{host}:{port}/v1", model="m")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@async_test
async def test_a_listening_server_is_ready_and_a_dead_port_says_how_to_start_it() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        found = await discovery.detect(_manifest("up", port))
        assert found.error is None
    dead = _free_port()
    found = await discovery.detect(_manifest("ollama", dead))
    assert found.error == "not running: start it with `ollama serve`"
    assert found.path == f"http://127.0.0.1:{dead}/v1"
    other = await discovery.detect(_manifest("mine", _free_port()))
    assert other.error is not None and other.error.startswith("not running: start the server at")


@async_test
async def test_the_answer_is_cached_briefly_and_fast() -> None:
    port = _free_port()
    started = time.monotonic()
    assert not await discovery.server_alive("127.0.0.1", port)
    assert time.monotonic() - started < discovery.SERVER_PROBE_TIMEOUT_S + 0.5
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        assert not await discovery.server_alive("127.0.0.1", port), "cached"
        discovery._server_cache.clear()
        assert await discovery.server_alive("127.0.0.1", port)


def test_only_servers_on_this_machine_are_probed() -> None:
    assert discovery.local_server("http://localhost:11434/v1") == ("localhost", 11434)
    assert discovery.local_server("http://127.0.0.1/v1") == ("127.0.0.1", 80)
    assert discovery.local_server("https://api.openai.com/v1") is None


def test_cannot_reach_gives_the_next_step() -> None:
    local = unreachable_next_step("http://localhost:11434/v1/chat/completions")
    assert "Ollama is not running" in local and "`ollama serve`" in local
    remote = unreachable_next_step("https://example.invalid/v1/chat/completions")
    assert "check the address" in remote
