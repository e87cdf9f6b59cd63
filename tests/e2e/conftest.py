"""End-to-end tier: the real CLIs, installed from the npm registry at pinned versions into a cache
outside the repository, run by Tolaria against a scripted fake model server on 127.0.0.1.

The tier skips only when npm or its registry cannot be reached, and then says so loudly at the
end of the run; any other install problem fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e.e2ehelpers import SKIPPED
from e2e.fake_model import FakeModelServer


@pytest.fixture(scope="session")
def model_server() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    yield server
    server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for message in SKIPPED:
        terminalreporter.write_sep("!", message, red=True, bold=True)
