"""Detection and health (``tolaria agents``), and runs of programs found beyond PATH.

Real fake installs (``installs``): a fake user's HOME, scripts that print versions, an nvm
folder whose CLI needs its sibling ``node``, a codex npm wrapper with its native binary.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import FAKE_AGENT, Collector, async_test, cli_env, start_run, wait_until
from installs import (
    PROGRAM,
    User,
    banner_shell,
    codex_package,
    executable,
    fake_user,
    hanging_shell,
    link,
    version_script,
)

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import STOP_CANCELLED, STOP_END_TURN, STOP_ERROR, Error
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.programs import locate
from tolaria.core.programs.discovery import detect, probe_version
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> User:
    return fake_user(tmp_path, monkeypatch)


def manifest(program: str = PROGRAM, version: bool = True, hint: str = "") -> Manifest:
    return Manifest(id="fakecli", name="Fake CLI", protocol="claude-stream-json",
                    command=(program, "normal", "{prompt}"),
                    version_command=(program, "--version") if version else (),
                    install_hint=hint)


# --- detect -------------------------------------------------------------------------------------

@async_test
async def test_detect_reports_path_source_and_version(user: User) -> None:
    script = version_script(user.home / ".volta" / "bin", version="4.5.6")
    found = await detect(manifest())
    assert (found.path, found.source, found.found_at, found.native) == (
        str(script), locate.SOURCE_VOLTA, str(script), False)
    assert found.version is not None and "4.5.6" in found.version
    assert found.error is None


@async_test
async def test_detect_not_installed_says_where_it_looked_and_how_to_install(user: User) -> None:
    found = await detect(manifest(hint="npm install -g fake-cli"))
    assert found.path is None and found.source is None and found.version is None
    assert found.error is not None
    assert "not found on PATH, in your login shell's PATH" in found.error
    assert "~/.local/bin" in found.error and "~/.bun/bin" in found.error
    assert found.error.endswith("; install with: npm install -g fake-cli")


@async_test
async def test_detect_codex_shows_the_native_binary_and_gives_it_the_wrappers_env(
        user: User) -> None:
    prefix = user.home / ".npm-global"
    wrapper, binary, package = codex_package(prefix / "lib" / "node_modules", nested=True)
    entry = link(prefix / "bin" / "codex", wrapper)
    found = await detect(manifest("codex"))
    assert (found.path, found.found_at, found.native) == (str(binary), str(entry), True)
    # The version came from the native binary, with what the wrapper would have set.
    assert found.version == f"codex-cli 0.171.0 native root={package} npm=1 bun="
    binary.unlink()
    fallback = await detect(manifest("codex"))
    assert (fallback.path, fallback.native, fallback.version) == (str(entry), False,
                                                                   "wrapper 0.171.0")


# --- the version probe's errors -----------------------------------------------------------------

@async_test
async def test_probe_errors_say_what_went_wrong(user: User, tmp_path: Path) -> None:
    failing = executable(tmp_path / "failing", "#!/bin/sh\necho 'config is broken: fix it' >&2\n"
                                               "echo second line\nexit 3\n")
    version, error = await probe_version([str(failing), "--version"])
    assert version is None
    assert error == "`failing --version` exited with code 3: config is broken: fix it"

    silent = executable(tmp_path / "silent", "#!/bin/sh\nexit 1\n")
    assert (await probe_version([str(silent)]))[1] == "`silent` exited with code 1 and printed nothing"

    # An npm CLI whose interpreter is missing: `env` exits 127.
    no_node = executable(tmp_path / "nonode", "#!/usr/bin/env tolaria-no-such-node\n")
    _, error = await probe_version([str(no_node), "--version"], env={"PATH": str(user.path_dir)})
    assert error is not None and "exited with code 127" in error
    assert "such as node, may be missing from PATH" in error

    not_exec = tmp_path / "notexec"
    not_exec.write_text("#!/bin/sh\necho 1.0\n")
    assert (await probe_version([str(not_exec)]))[1] == (
        f"{not_exec} is not executable (chmod +x it, or reinstall)")

    hang = executable(tmp_path / "hang", "#!/bin/sh\nexec sleep 30\n")
    started = time.monotonic()
    version, error = await probe_version([str(hang), "--version"], timeout=0.5,
                                         env={"PATH": "/usr/bin:/bin"})
    assert time.monotonic() - started < 3
    assert error is not None and error.startswith("`hang --version` timed out after 0.5 s")


@async_test
async def test_probe_prefers_the_version_line_over_a_warning(tmp_path: Path) -> None:
    noisy = executable(tmp_path / "noisy", "#!/bin/sh\necho 'WARNING: home is under /tmp'\n"
                                           "echo 'noisy-cli 0.9.1'\n")
    assert await probe_version([str(noisy)]) == ("noisy-cli 0.9.1", None)


# --- runs -------------------------------------------------------------------------------------

def _nvm_cli(user: User) -> Path:
    """A CLI in an nvm folder, ``#!/usr/bin/env`` its sibling interpreter, like an npm CLI
    is ``#!/usr/bin/env node`` next to nvm's ``node``."""
    bin_dir = user.home / ".nvm" / "versions" / "node" / "v22.1.0" / "bin"
    executable(bin_dir / "tolaria-fake-node",
               f'#!/bin/sh\nshift\nexec "{sys.executable}" "{FAKE_AGENT}" "$@"\n')
    return executable(bin_dir / PROGRAM, "#!/usr/bin/env tolaria-fake-node\n")


@async_test
async def test_run_of_a_program_found_only_in_nvm_gets_its_folder_on_path(user: User) -> None:
    _nvm_cli(user)
    collector = Collector()
    request = RunRequest(manifest(), "hello", str(user.home))
    done = await stream_ai_agent(request, new_stream_id(), collector, registry=ProcessRegistry(),
                                 grace_s=0.5)
    assert done.stop_reason == STOP_END_TURN, collector.kinds()
    assert "Hello from fake" in collector.text()


@async_test
async def test_without_its_folder_on_path_the_same_program_cannot_start(user: User) -> None:
    """The control: run by its full path, nothing is prepended and ``env`` finds no node."""
    script = _nvm_cli(user)
    collector = Collector()
    request = RunRequest(manifest(str(script)), "hello", str(user.home))
    done = await stream_ai_agent(request, new_stream_id(), collector, registry=ProcessRegistry(),
                                 grace_s=0.5)
    assert done.stop_reason != STOP_END_TURN


@async_test
async def test_run_of_a_missing_program_fails_with_the_install_hint(user: User) -> None:
    collector = Collector()
    request = RunRequest(manifest(hint="npm install -g fake-cli"), "hello", str(user.home))
    done = await stream_ai_agent(request, new_stream_id(), collector, registry=ProcessRegistry())
    assert done.stop_reason == STOP_ERROR
    [error] = [e for e in collector.events if isinstance(e, Error)]
    assert error.message.startswith(f"Fake CLI: {PROGRAM!r} not found on PATH, in your login")
    assert error.message.endswith("; install it with: npm install -g fake-cli")


@async_test
async def test_a_stop_does_not_wait_for_a_slow_login_shell(user: User, tmp_path: Path) -> None:
    user.set_shell(hanging_shell(tmp_path / "slowsh", tmp_path / "shell.pids"))
    run = start_run(manifest(), cwd=user.home)
    # The program is not on PATH: the run is now waiting for the login shell (3 s timeout).
    await wait_until((tmp_path / "shell.pids").exists, what="the login shell to start")
    started = time.monotonic()
    assert run.abort()
    done = await run.finish(within=5)
    assert done.stop_reason == STOP_CANCELLED
    assert time.monotonic() - started < 1.0, "the stop did not wait for the shell's timeout"


@async_test
async def test_login_shell_folder_reaches_the_run(user: User, tmp_path: Path) -> None:
    shell_bin = tmp_path / "shell-bin"
    executable(shell_bin / PROGRAM, f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_AGENT}" print_env\n')
    user.set_shell(banner_shell(tmp_path / "fakesh", f"/usr/bin:{shell_bin}"))
    collector = Collector()
    request = RunRequest(manifest(), "hello", str(user.home))
    done = await stream_ai_agent(request, new_stream_id(), collector, registry=ProcessRegistry())
    assert done.stop_reason == STOP_END_TURN, collector.kinds()
    printed = json.loads(collector.text())
    assert printed["argv"][0] == str(FAKE_AGENT)


# --- the CLI ----------------------------------------------------------------------------------

def test_tolaria_agents_shows_where_each_program_was_found(user: User, tolaria_home: Path) -> None:
    version_script(user.home / ".bun" / "bin", version="7.8.9")
    prefix = user.home / ".npm-global"
    wrapper, binary, _ = codex_package(prefix / "lib" / "node_modules", nested=True)
    link(prefix / "bin" / "codex", wrapper)
    adapters = tolaria_home / "adapters"
    adapters.mkdir()
    for ident, program in (("fakecli", PROGRAM), ("fakecodex", "codex")):
        (adapters / f"{ident}.toml").write_text(
            f'id = "{ident}"\nname = "Fake {ident}"\nprotocol = "claude-stream-json"\n'
            f'command = ["{program}", "{{prompt}}"]\nversion_command = ["{program}", "--version"]\n')
    env = cli_env(tolaria_home)
    text = subprocess.run([sys.executable, "-m", "tolaria", "agents"], env=env, cwd=user.home,
                          capture_output=True, text=True, timeout=60, check=True).stdout
    line = next(x for x in text.splitlines() if x.startswith("fakecli "))
    assert "7.8.9" in line and line.endswith(f"{user.home}/.bun/bin/{PROGRAM}  [bun]")
    lines = text.splitlines()
    index = next(i for i, x in enumerate(lines) if x.startswith("fakecodex "))
    assert lines[index].endswith(f"{binary}  [npm global]")
    assert lines[index + 1].strip() == f"native binary of the wrapper {prefix}/bin/codex"
    data = json.loads(subprocess.run([sys.executable, "-m", "tolaria", "agents", "--json"],
                                     env=env, cwd=user.home, capture_output=True, text=True,
                                     timeout=60, check=True).stdout)
    fake = next(a for a in data["agents"] if a["agent"] == "fakecodex")
    assert (fake["source"], fake["native"], fake["path"]) == ("npm global", True, str(binary))
