"""Native binaries behind npm wrapper scripts: spawn the agent itself, not a launcher.

Some npm packages install a small Node script as their ``bin`` that only finds a native binary
of the platform and starts it as a child (``@openai/codex``: ``bin/codex.js`` starts
``@openai/codex-<platform>-<arch>/vendor/<target-triple>/bin/codex``; with Node < 23.11 it spawns
a child and stays alive forwarding signals). Spawning the native binary directly makes the pid
Tolaria holds the agent (one less process in the tree, signals reach the agent, not a forwarder).

The rules are data (:data:`RULES`, keyed by the wrapper's npm package name) so another package
can be added without code. Templates in a rule use ``str.format`` fields: ``{package_dir}``
(the wrapper package's real folder), ``{platform_package_dir}``, ``{vendor}``, ``{triple}``,
``{platform}``, ``{arch}``, ``{exe}`` and ``{MANAGER}`` (``NPM``, ``PNPM`` or ``BUN``: who
installed it, as the wrapper would tell the binary). When a rule finds no native binary, the
caller keeps the wrapper.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: How far up from the wrapper script we look for its package.json.
_MAX_PACKAGE_DEPTH = 6
#: A shim is a few lines; anything longer is some other program.
_SHIM_MAX_BYTES = 4096
_SHIM_TARGET = re.compile(r'"\$basedir/([^"]+)"')


@dataclass(frozen=True)
class NativeRule:
    """How an npm package's wrapper script finds its native binary (and what it adds)."""

    #: The npm package whose ``bin`` is the wrapper script.
    package: str
    #: (platform, arch) as Node names them -> the target triple of the native build.
    targets: Mapping[tuple[str, str], str]
    #: The optional dependency that carries the build for this platform.
    platform_package: str
    #: Folders that may hold ``<triple>/...``, in the wrapper's order of preference.
    vendor_dirs: tuple[str, ...]
    #: The native binary inside a vendor folder.
    binary: str
    #: Folders the wrapper prepends to PATH when they exist (e.g. a bundled ``rg``).
    path_dirs: tuple[str, ...] = ()
    #: Variables the wrapper sets for the binary.
    env: Mapping[str, str] = field(default_factory=dict)
    #: Variables the wrapper removes before setting ``env``.
    unset: tuple[str, ...] = ()
    #: For a wrapper that relaunches a script under an interpreter (``node --expose-gc
    #: cli.js``): that interpreter and its options; ``binary`` is then the script, found in the
    #: wrapper's own package (``{package_dir}``) on every platform.
    interpreter: tuple[str, ...] = ()


@dataclass(frozen=True)
class NativeLaunch:
    """The native binary to run instead of a wrapper, and the environment the wrapper gives it."""

    program: str
    package: str
    env: Mapping[str, str]
    unset: tuple[str, ...]
    path_dirs: tuple[str, ...]
    #: Arguments between ``program`` and the command's own (an interpreter's options + script).
    args: tuple[str, ...] = ()


_CODEX_MANAGERS = ("CODEX_MANAGED_BY_NPM", "CODEX_MANAGED_BY_BUN", "CODEX_MANAGED_BY_PNPM",
                   "CODEX_MANAGED_BY_VITE_PLUS")

RULES: dict[str, NativeRule] = {
    # Read from @openai/codex 0.171.0 bin/codex.js. Older releases kept the builds in the
    # package's own vendor/ and prepended vendor/<triple>/path (a bundled rg) to PATH; newer
    # binaries find their codex-path/ themselves from codex-package.json.
    "@openai/codex": NativeRule(
        package="@openai/codex",
        targets={
            ("linux", "x64"): "x86_64-unknown-linux-musl",
            ("linux", "arm64"): "aarch64-unknown-linux-musl",
            ("darwin", "x64"): "x86_64-apple-darwin",
            ("darwin", "arm64"): "aarch64-apple-darwin",
            ("win32", "x64"): "x86_64-pc-windows-msvc",
            ("win32", "arm64"): "aarch64-pc-windows-msvc",
        },
        platform_package="@openai/codex-{platform}-{arch}",
        vendor_dirs=("{platform_package_dir}/vendor", "{package_dir}/vendor"),
        binary="{vendor}/{triple}/bin/codex{exe}",
        path_dirs=("{vendor}/{triple}/path",),
        env={"CODEX_MANAGED_PACKAGE_ROOT": "{package_dir}", "CODEX_MANAGED_BY_{MANAGER}": "1"},
        unset=_CODEX_MANAGERS,
    ),
    # Read from @qwen-code/qwen-code 0.24.4 cli-entry.js: for a prompt it runs
    # `node --expose-gc cli.js ARGS` as a child (spawnSync) and waits, so the pid held would be
    # the launcher's; a signal to it leaves the agent and its tool running (measured).
    "@qwen-code/qwen-code": NativeRule(
        package="@qwen-code/qwen-code",
        targets={},
        platform_package="",
        vendor_dirs=(),
        binary="{package_dir}/cli.js",
        env={"QWEN_CODE_CLI": "{wrapper}"},
        interpreter=("node", "--expose-gc"),
    ),
}


def node_platform() -> tuple[str, str]:
    """This machine as Node's ``process.platform`` and ``process.arch`` name it."""
    plat = "linux" if sys.platform.startswith("linux") else sys.platform
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine,
                                                                                     machine)
    return plat, arch


def find_native(program: str, rules: Mapping[str, NativeRule] | None = None) -> NativeLaunch | None:
    """The native binary behind ``program`` if it is a known npm wrapper, else None.

    ``program`` is the path where the command was found: often a symlink in a ``bin`` folder,
    whose real path leads to the wrapper's package, or a pnpm shell shim naming the script.
    """
    rules = RULES if rules is None else rules
    real = Path(os.path.realpath(program))
    if "node_modules" not in real.parts:
        shimmed = _shim_script(real)
        if shimmed is None:
            return None
        real = shimmed
    package_dir, name = _owning_package(real)
    if package_dir is None or name is None or name not in rules:
        return None
    return _apply(rules[name], package_dir, program)


def _shim_script(shim: Path) -> Path | None:
    """The script a pnpm (cmd-shim) ``sh`` shim starts: ``exec node "$basedir/.../x.js" "$@"``.

    pnpm puts such shell scripts in its bin folder instead of symlinks.
    """
    try:
        with open(shim, "rb") as fh:
            head = fh.read(_SHIM_MAX_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!/bin/sh"):
        return None
    for match in _SHIM_TARGET.finditer(head.decode(errors="replace")):
        target = Path(os.path.realpath(shim.parent / match.group(1)))
        if "node_modules" in target.parts and target.is_file():
            return target
    return None


def _owning_package(script: Path) -> tuple[Path | None, str | None]:
    for folder in list(script.parents)[:_MAX_PACKAGE_DEPTH]:
        manifest = folder / "package.json"
        if manifest.is_file():
            try:
                data = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None, None
            name = data.get("name") if isinstance(data, dict) else None
            return folder, name if isinstance(name, str) else None
        if folder.name == "node_modules":
            break
    return None, None


def _apply(rule: NativeRule, package_dir: Path, program: str) -> NativeLaunch | None:
    if rule.interpreter:
        return _apply_interpreted(rule, package_dir, program)
    plat, arch = node_platform()
    triple = rule.targets.get((plat, arch))
    if triple is None:
        return None
    fields = {"package_dir": str(package_dir), "platform": plat, "arch": arch, "triple": triple,
              "exe": ".exe" if plat == "win32" else "",
              "MANAGER": _package_manager(package_dir, rule.package, program)}
    platform_dir = _node_resolve(package_dir, rule.platform_package.format(**fields))
    for vendor_template in rule.vendor_dirs:
        if "{platform_package_dir}" in vendor_template and platform_dir is None:
            continue
        vendor = vendor_template.format(platform_package_dir=str(platform_dir), **fields)
        binary = rule.binary.format(vendor=vendor, **fields)
        if os.path.isfile(binary) and os.access(binary, os.X_OK):
            path_dirs = tuple(p for p in (d.format(vendor=vendor, **fields) for d in rule.path_dirs)
                              if os.path.isdir(p))
            env = {k.format(**fields): v.format(vendor=vendor, **fields)
                   for k, v in rule.env.items()}
            return NativeLaunch(binary, rule.package, env, rule.unset, path_dirs)
    return None


def _apply_interpreted(rule: NativeRule, package_dir: Path, program: str) -> NativeLaunch | None:
    """The script the wrapper relaunches, under the interpreter found next to the wrapper (an
    nvm or Homebrew bin folder holds its node) or on PATH."""
    script = rule.binary.format(package_dir=str(package_dir))
    if not os.path.isfile(script):
        return None
    name = rule.interpreter[0]
    search = os.pathsep.join([os.path.dirname(program), os.environ.get("PATH", os.defpath)])
    interpreter = shutil.which(name, path=search)
    if interpreter is None:
        return None
    env = {k: v.format(wrapper=program, package_dir=str(package_dir)) for k, v in rule.env.items()}
    return NativeLaunch(interpreter, rule.package, env, rule.unset, (),
                        args=(*rule.interpreter[1:], script))


def _node_resolve(start: Path, package: str) -> Path | None:
    """Where ``require.resolve(package)`` from ``start`` would find the package's folder."""
    for folder in (start, *start.parents):
        if folder.name == "node_modules":
            continue
        candidate = folder / "node_modules" / package
        if (candidate / "package.json").is_file():
            return candidate
    return None


def _package_manager(package_dir: Path, package: str, program: str) -> str:
    """Who installed the package, as the codex wrapper works it out (pnpm, bun, else npm)."""
    for start in (package_dir, Path(program).parent):
        for folder in _ancestors(start):
            modules = folder / "node_modules"
            if (modules / ".modules.yaml").is_file():
                with contextlib.suppress(OSError):
                    if os.path.realpath(modules / package) == str(package_dir):
                        return "PNPM"
    text = f"{package_dir}{os.sep}{program}".replace("\\", "/")
    return "BUN" if ".bun/install/global" in text else "NPM"


def _ancestors(start: Path) -> Iterator[Path]:
    yield start
    yield from start.parents
