"""Finding an agent's program beyond PATH (``tolaria.core.programs.locate``), on real fake install trees.

Each test gets a fake user (``installs.fake_user``): HOME under tmp_path, an empty PATH folder,
a login shell that cannot start (until the test sets a fake one), no install variables.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import Collector, async_test, pid_gone
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
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.programs import locate, login_shell
from tolaria.core.programs.native import find_native
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> User:
    return fake_user(tmp_path, monkeypatch)


async def find(program: str = PROGRAM, **kwargs: float) -> locate.Location:
    return await locate.find_program(program, os.environ, **kwargs)  # type: ignore[arg-type]


async def missing(program: str = PROGRAM, **kwargs: float) -> str:
    with pytest.raises(locate.ProgramNotFound) as info:
        await find(program, **kwargs)
    return str(info.value)


# --- one test per kind of install folder -------------------------------------------------------

def _npm_prefix_env(user: User) -> Path:
    user.monkeypatch.setenv("NPM_CONFIG_PREFIX", str(user.home / "npm-prefix"))
    return user.home / "npm-prefix" / "bin"


def _npmrc(user: User) -> Path:
    (user.home / ".npmrc").write_text("; comment\nfund=false\nprefix = ~/.npm-packages\n")
    return user.home / ".npm-packages" / "bin"


def _nvm_bin(user: User) -> Path:
    folder = user.home / "somewhere" / "node-current" / "bin"
    user.monkeypatch.setenv("NVM_BIN", str(folder))
    return folder


def _pnpm_home(user: User) -> Path:
    user.monkeypatch.setenv("PNPM_HOME", str(user.home / "pnpm-home"))
    return user.home / "pnpm-home"


def _under_home(*parts: str) -> Callable[[User], Path]:
    return lambda user: user.home.joinpath(*parts)


def _var(name: str, *parts: str) -> Callable[[User], Path]:
    """A folder named by an install variable (``$NAME/parts...``), somewhere unusual."""
    def make(user: User) -> Path:
        root = user.home / "opt" / name.lower()
        user.monkeypatch.setenv(name, str(root))
        return root.joinpath(*parts)
    return make


KINDS: list[tuple[str, Callable[[User], Path], str]] = [
    ("npm-config-prefix", _npm_prefix_env, locate.SOURCE_NPM),
    ("npmrc-prefix", _npmrc, locate.SOURCE_NPM),
    ("npm-global", _under_home(".npm-global", "bin"), locate.SOURCE_NPM),
    ("local-bin", _under_home(".local", "bin"), locate.SOURCE_LOCAL),
    ("linuxbrew", _under_home(".linuxbrew", "bin"), locate.SOURCE_HOMEBREW),
    ("homebrew-prefix", _var("HOMEBREW_PREFIX", "bin"), locate.SOURCE_HOMEBREW),
    ("nvm-dir", _var("NVM_DIR", "versions", "node", "v21.0.0", "bin"), locate.SOURCE_NVM),
    ("bun-install", _var("BUN_INSTALL", "bin"), locate.SOURCE_BUN),
    ("volta-home", _var("VOLTA_HOME", "bin"), locate.SOURCE_VOLTA),
    ("nvm-bin", _nvm_bin, locate.SOURCE_NVM),
    ("nvm-versions", _under_home(".nvm", "versions", "node", "v22.3.0", "bin"), locate.SOURCE_NVM),
    ("bun", _under_home(".bun", "bin"), locate.SOURCE_BUN),
    ("pnpm-home", _pnpm_home, locate.SOURCE_PNPM),
    ("pnpm-share", _under_home(".local", "share", "pnpm"), locate.SOURCE_PNPM),
    *([("pnpm-library", _under_home("Library", "pnpm"), locate.SOURCE_PNPM)]
      if sys.platform == "darwin" else []),
    ("volta", _under_home(".volta", "bin"), locate.SOURCE_VOLTA),
]


@pytest.mark.parametrize(("kind", "folder_of", "source"), KINDS, ids=[k[0] for k in KINDS])
@async_test
async def test_finds_the_program_in_each_install_folder(user: User, kind: str,
                                                        folder_of: Callable[[User], Path],
                                                        source: str) -> None:
    folder = folder_of(user)
    assert "not found on PATH" in await missing(), "only after the install does it show up"
    login_shell.clear_cache()
    script = version_script(folder)
    found = await find()
    assert (found.program, found.found_at, found.source) == (str(script), str(script), source)
    assert not found.native
    # The folder is not on the run's PATH: the agent gets it first on its PATH.
    env = found.environment({"PATH": str(user.path_dir), "OTHER": "kept"})
    assert env["PATH"].split(os.pathsep) == [str(folder), str(user.path_dir)]
    assert env["OTHER"] == "kept"


@async_test
async def test_path_comes_first_and_changes_nothing(user: User) -> None:
    version_script(user.home / ".local" / "bin")
    on_path = version_script(user.path_dir)
    found = await find()
    assert (found.program, found.source, found.path_dirs) == (str(on_path), locate.SOURCE_PATH, ())
    assert found.environment({"PATH": "/x"}) == {"PATH": "/x"}


@async_test
async def test_search_order_is_the_documented_one(user: User) -> None:
    """~/.local/bin before Homebrew before nvm before bun before pnpm before volta."""
    order = [(user.home / ".volta" / "bin", locate.SOURCE_VOLTA),
             (user.home / ".local" / "share" / "pnpm", locate.SOURCE_PNPM),
             (user.home / ".bun" / "bin", locate.SOURCE_BUN),
             (user.home / ".nvm" / "versions" / "node" / "v20.0.0" / "bin", locate.SOURCE_NVM),
             (user.home / ".linuxbrew" / "bin", locate.SOURCE_HOMEBREW),
             (user.home / ".local" / "bin", locate.SOURCE_LOCAL),
             (user.home / ".npm-global" / "bin", locate.SOURCE_NPM)]
    for folder, source in order:
        version_script(folder)
        found = await find()
        assert (found.source, found.program) == (source, str(folder / PROGRAM))
    folders = [f for f, _ in locate.install_folders(os.environ)]
    if sys.platform == "darwin":
        assert folders.index("/usr/local/bin") < folders.index("/opt/homebrew/bin")
    assert folders.count("/usr/local/bin") == 1


def test_macos_folders_are_neither_searched_nor_listed_elsewhere() -> None:
    folders = [f for f, _ in locate.install_folders(os.environ)]
    mac_only = ("/opt/homebrew/bin", os.path.join(os.path.expanduser("~"), "Library", "pnpm"))
    for folder in mac_only:
        assert (folder in folders) == (sys.platform == "darwin"), folder


@async_test
async def test_nvm_picks_the_newest_node_version(user: User) -> None:
    versions = user.home / ".nvm" / "versions" / "node"
    for version in ("v9.11.2", "v20.11.1", "v18.20.4", "v20.9.0"):
        version_script(versions / version / "bin", version=version)
    found = await find()
    assert found.program == str(versions / "v20.11.1" / "bin" / PROGRAM)
    assert found.source == locate.SOURCE_NVM
    order = [f for f, s in locate.install_folders(os.environ) if s == locate.SOURCE_NVM]
    assert [Path(f).parent.name for f in order] == ["v20.11.1", "v20.9.0", "v18.20.4", "v9.11.2"]


@async_test
async def test_not_found_lists_where_it_looked(user: User) -> None:
    message = await missing()
    assert f"{PROGRAM!r} not found on PATH, in your login shell's PATH" in message
    assert "could not read it: cannot run" in message, "why the login shell gave nothing"
    for folder in ("~/.local/bin", "~/.npm-global/bin", "~/.bun/bin", "~/.volta/bin"):
        assert folder in message


@async_test
async def test_a_file_that_is_not_executable_says_so(user: User) -> None:
    stray = user.home / ".local" / "bin" / PROGRAM
    stray.parent.mkdir(parents=True)
    stray.write_text("#!/bin/sh\necho hi\n")
    message = await missing()
    assert f"found {stray}, but it is not executable" in message
    assert "chmod +x" in message
    assert "is not executable" in await missing(str(stray))
    assert "does not exist" in await missing(str(user.home / "nope"))
    assert "is not a file" in await missing(str(user.home))


@async_test
async def test_a_given_path_is_used_as_is(user: User) -> None:
    script = version_script(user.home / "tools")
    found = await find(str(script))
    assert (found.program, found.source, found.path_dirs) == (str(script), locate.SOURCE_GIVEN, ())


# --- the login shell ---------------------------------------------------------------------------

@async_test
async def test_login_shell_path_between_banners(user: User, tmp_path: Path) -> None:
    shell_only = tmp_path / "shell-only-bin"
    version_script(shell_only)
    version_script(user.home / ".local" / "bin")  # later in the order: must lose
    log = tmp_path / "shell.log"
    user.set_shell(banner_shell(tmp_path / "fakesh", f"/usr/bin:{shell_only}:/bin", log))
    found = await find()
    assert (found.program, found.source) == (str(shell_only / PROGRAM), locate.SOURCE_LOGIN_SHELL)
    assert found.path_dirs == (str(shell_only),)
    answer = await login_shell.login_shell_path()
    assert answer.path == f"/usr/bin:{shell_only}:/bin", "the banners are not part of it"
    args = log.read_text().splitlines()
    assert len(args) == 1, "asked once, then cached"
    assert args[0].startswith("-l -c printf")


@async_test
async def test_login_shell_is_asked_once_by_concurrent_lookups(user: User, tmp_path: Path) -> None:
    log = tmp_path / "shell.log"
    user.set_shell(banner_shell(tmp_path / "zsh", "/usr/bin:/bin", log))
    results = await asyncio.gather(*(login_shell.login_shell_path() for _ in range(5)))
    assert {r.path for r in results} == {"/usr/bin:/bin"}
    [args] = log.read_text().splitlines()
    assert args.startswith("-l -i -c "), "zsh and bash are asked as interactive login shells"


@async_test
async def test_a_shell_echoing_its_command_does_not_fool_the_markers(user: User,
                                                                     tmp_path: Path) -> None:
    # ``set -v`` style: the shell prints the command it runs, then runs it.
    echoing = executable(tmp_path / "echosh", """#!/bin/sh
while [ "$#" -gt 0 ] && [ "$1" != "-c" ]; do shift; done
printf '%s\\n' "$2"
PATH=/from/the/shell
/bin/sh -c "$2"
""")
    user.set_shell(echoing)
    answer = await login_shell.login_shell_path()
    assert answer.path == "/from/the/shell"


@async_test
async def test_a_hanging_login_shell_times_out_and_leaves_nothing(user: User,
                                                                  tmp_path: Path) -> None:
    pidfile = tmp_path / "shell.pids"
    user.set_shell(hanging_shell(tmp_path / "slowsh", pidfile))
    started = time.monotonic()
    message = await missing(shell_timeout=1.0)
    assert time.monotonic() - started < 4
    assert "did not print its PATH within 1 s" in message
    shell_pid, sleep_pid = (int(p) for p in pidfile.read_text().split())
    assert pid_gone(shell_pid) and pid_gone(sleep_pid), "the shell and its child were killed"
    # The failure is cached too: the next lookup does not wait again.
    started = time.monotonic()
    await missing(shell_timeout=1.0)
    assert time.monotonic() - started < 0.5


def test_shell_argv_per_shell() -> None:
    begin, end = "__B_abcdef__", "__E_abcdef__"
    for shell, flags in (("/bin/bash", ["-l", "-i", "-c"]), ("/usr/bin/zsh", ["-l", "-i", "-c"]),
                         ("/bin/sh", ["-l", "-c"]), ("/usr/bin/fish", ["-l", "-c"]),
                         ("/bin/tcsh", ["-c"])):
        argv = login_shell.shell_argv(shell, begin, end)
        assert argv[:-1] == [shell, *flags]
        assert begin not in argv[-1] and end not in argv[-1], "markers only appear when printed"
    assert "string join : $PATH" in login_shell.shell_argv("/usr/bin/fish", begin, end)[-1]
    text = f"motd {begin} fake {end}\n{begin}/a:/b{end} bye"
    assert login_shell.parse_output(text, begin, end) == "fake"  # first pair wins...
    assert login_shell.parse_output("no markers", begin, end) is None


# --- native binaries behind npm wrappers ------------------------------------------------------

@async_test
async def test_codex_wrapper_gives_way_to_its_native_binary(user: User) -> None:
    """``npm -g`` layout: prefix/bin/codex -> ../lib/node_modules/@openai/codex/bin/codex.js."""
    prefix = user.home / ".npm-global"
    wrapper, binary, package = codex_package(prefix / "lib" / "node_modules", nested=True)
    entry = link(prefix / "bin" / "codex", wrapper)
    found = await find("codex")
    assert found.native
    assert (found.program, found.found_at, found.source) == (str(binary), str(entry),
                                                             locate.SOURCE_NPM)
    env = found.environment({"PATH": "/usr/bin", "CODEX_MANAGED_BY_BUN": "1"})
    assert env["CODEX_MANAGED_PACKAGE_ROOT"] == str(package)
    assert env["CODEX_MANAGED_BY_NPM"] == "1"
    assert "CODEX_MANAGED_BY_BUN" not in env, "the wrapper removes the other managers' flags"
    assert env["PATH"].split(os.pathsep)[0] == str(prefix / "bin")


@async_test
async def test_codex_flat_layout_as_in_a_local_install(user: User, tmp_path: Path) -> None:
    """The layout of the real cache: node_modules/.bin/codex, the platform package beside."""
    modules = tmp_path / "project" / "node_modules"
    wrapper, binary, _ = codex_package(modules, nested=False)
    entry = link(modules / ".bin" / "codex", wrapper)
    native = find_native(str(entry))
    assert native is not None and native.program == str(binary)


@async_test
async def test_codex_under_bun_says_bun(user: User) -> None:
    wrapper, binary, _ = codex_package(user.home / ".bun" / "install" / "global" / "node_modules",
                                       nested=False)
    link(user.home / ".bun" / "bin" / "codex", wrapper)
    found = await find("codex")
    assert (found.program, found.source) == (str(binary), locate.SOURCE_BUN)
    env = dict(found.set_env)
    assert env.get("CODEX_MANAGED_BY_BUN") == "1" and "CODEX_MANAGED_BY_NPM" not in env


@async_test
async def test_codex_through_a_pnpm_shim(user: User) -> None:
    """pnpm's bin folder holds ``sh`` shims, its packages live in a virtual store."""
    pnpm_home = user.home / ".local" / "share" / "pnpm"
    modules = pnpm_home / "global" / "5" / "node_modules"
    store = modules / ".pnpm" / "@openai+codex@0.171.0" / "node_modules"
    _, binary, package = codex_package(store, nested=False)
    (modules / ".modules.yaml").write_text("layoutVersion: 5\n")
    link(modules / "@openai" / "codex", package)
    executable(pnpm_home / "codex", """#!/bin/sh
basedir=$(dirname "$(echo "$0" | sed -e 's,\\\\,/,g')")
if [ -x "$basedir/node" ]; then
  exec "$basedir/node"  "$basedir/global/5/node_modules/@openai/codex/bin/codex.js" "$@"
else
  exec node  "$basedir/global/5/node_modules/@openai/codex/bin/codex.js" "$@"
fi
""")
    found = await find("codex")
    assert (found.program, found.source, found.native) == (str(binary), locate.SOURCE_PNPM, True)
    env = dict(found.set_env)
    assert env["CODEX_MANAGED_BY_PNPM"] == "1"
    assert env["CODEX_MANAGED_PACKAGE_ROOT"] == str(package)


@async_test
async def test_codex_without_its_native_binary_keeps_the_wrapper(user: User) -> None:
    prefix = user.home / ".npm-global"
    wrapper, binary, _ = codex_package(prefix / "lib" / "node_modules", nested=True, native=False)
    entry = link(prefix / "bin" / "codex", wrapper)
    found = await find("codex")
    assert not binary.exists()
    assert (found.program, found.native, found.set_env) == (str(entry), False, ())


def test_programs_outside_node_modules_have_no_native_rule(tmp_path: Path) -> None:
    script = version_script(tmp_path / "bin", name="codex")
    (tmp_path / "package.json").write_text('{"name": "@openai/codex"}')
    assert find_native(str(script)) is None


def qwen_package(prefix: Path) -> tuple[Path, Path]:
    """``@qwen-code/qwen-code`` under ``prefix`` (npm -g layout) with a stand-in ``node`` beside
    its bin entry: ``node --expose-gc SCRIPT ARGS`` runs SCRIPT with Python."""
    package = prefix / "lib" / "node_modules" / "@qwen-code" / "qwen-code"
    (package).mkdir(parents=True)
    (package / "package.json").write_text('{"name": "@qwen-code/qwen-code", '
                                          '"bin": {"qwen": "cli-entry.js"}}')
    wrapper = executable(package / "cli-entry.js", "#!/bin/sh\necho 'the launcher ran'\n")
    executable(package / "cli.js", "import os, sys\n"
               "print('agent', os.path.basename(sys.argv[0]), sys.argv[1:], "
               "os.environ.get('QWEN_CODE_CLI'))\n")
    executable(prefix / "bin" / "node",
               f'#!/bin/sh\n[ "$1" = "--expose-gc" ] && shift\nexec "{sys.executable}" "$@"\n')
    return link(prefix / "bin" / "qwen", wrapper), package / "cli.js"


@async_test
async def test_qwen_launcher_gives_way_to_node_running_its_cli(user: User) -> None:
    """Qwen's bin (cli-entry.js) relaunches ``node --expose-gc cli.js`` as a child and waits: the
    run spawns that command itself, with the node found beside the launcher (nvm, Homebrew)."""
    prefix = user.home / ".npm-global"
    entry, script = qwen_package(prefix)
    found = await find("qwen")
    assert found.native
    assert found.program == str(prefix / "bin" / "node")
    assert found.argv(["-p", "hi"]) == [found.program, "--expose-gc", str(script), "-p", "hi"]
    assert dict(found.set_env)["QWEN_CODE_CLI"] == str(entry)

    manifest = Manifest(id="qwenish", name="Qwen-ish", protocol="lines",
                        command=("qwen", "{prompt}"))
    events = Collector()
    done = await stream_ai_agent(RunRequest(manifest, "--not-a-flag"), new_stream_id(), events,
                                 registry=ProcessRegistry())
    assert done.stop_reason == "end_turn", events.events
    assert events.text().strip() == f"agent cli.js ['--not-a-flag'] {entry}"


def test_qwen_rule_needs_its_script(tmp_path: Path) -> None:
    entry, script = qwen_package(tmp_path / "prefix")
    script.unlink()
    assert find_native(str(entry)) is None
