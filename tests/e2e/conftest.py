"""End-to-end tier: the real CLIs, installed from the npm registry at pinned versions into a cache
outside the repository, run by Tolaria against a scripted fake model server on 127.0.0.1.

The tier skips only when npm or its registry cannot be reached, and then says so loudly at the
end of the run; any other install problem fails.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from clis import CLIS, Cli, RegistryUnreachable, install
from fake_model import FakeModelServer

_SKIPPED: list[str] = []


@pytest.fixture(scope="session")
def model_server() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    yield server
    server.stop()


def installed_cli(agent: str) -> Cli:
    """The pinned CLI for ``agent``, installed (once) into the cache; skip loudly without npm."""
    cli = CLIS[agent]
    try:
        install(cli)
    except RegistryUnreachable as exc:
        message = (f"END-TO-END TIER SKIPPED for {cli.spec}: the npm registry cannot be reached "
                   f"({exc}); the real CLIs were NOT tested")
        if message not in _SKIPPED:
            _SKIPPED.append(message)
            warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    return cli


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for message in _SKIPPED:
        terminalreporter.write_sep("!", message, red=True, bold=True)
