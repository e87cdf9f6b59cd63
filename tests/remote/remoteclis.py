"""The real CLIs (tests/e2e/clis.py) made runnable by the remote account ``tolaria-remote``.

The pinned packages live in the e2e cache under root's home, which the remote account cannot
read (and must not: a "host" has its own installation). They are put once into a cache folder
of that account, ``~tolaria-remote/.cache/tolaria-e2e/npm/<package-version>``: hard links of the
cache's files where both lie on one file system (instant, no second copy of ~400 MB), else a
copy; the folders belong to the remote account. Complete only once ``.complete`` names the
spec (a staging folder renamed into place). ``node`` comes from the system's PATH there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from e2e.clis import (
    CLIS,
    Cli,
    RegistryUnreachable,
    cache_root,
    install,
    installed,
    promote,
    run_env,
)
from remote.sshd import SKIPPED, remote_account

#: The remote account's PATH besides the CLI's own bin folder (node is /usr/bin/node here).
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def _skip(message: str) -> None:
    message = f"REMOTE TIER SKIPPED: {message}; the real CLIs were NOT tested on the host"
    if message not in SKIPPED:
        SKIPPED.append(message)
    pytest.skip(message)


def remote_bin(agent: str) -> tuple[Cli, Path]:
    """The pinned CLI for ``agent`` and its bin folder as the remote account sees it; a loud
    skip when it cannot be installed here (no npm, no registry) or node is missing."""
    cli = CLIS[agent]
    if shutil.which("node", path=SYSTEM_PATH) is None:
        _skip("node is not installed system-wide (the remote account needs it on its PATH)")
    if not installed(cli):
        try:
            install(cli)
        except RegistryUnreachable as exc:
            _skip(f"{cli.spec} is not installed and the npm registry cannot be reached ({exc})")
    account = remote_account()
    root = Path(account.pw_dir) / ".cache" / "tolaria-e2e" / "npm"
    final = root / cli.folder_name
    done = final / ".complete"
    if not (done.exists() and done.read_text() == cli.spec):
        _put(cache_root() / "npm" / cli.folder_name, root, final, cli.spec, account.pw_uid,
             account.pw_gid)
    return cli, final / "node_modules" / ".bin"


def _put(source: Path, root: Path, final: Path, spec: str, uid: int, gid: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for folder in (root, root.parent, root.parent.parent):  # .cache/tolaria-e2e/npm
        if folder.is_relative_to(Path(remote_account().pw_dir)):
            os.chown(folder, uid, gid)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    try:
        linked = subprocess.run(["cp", "-al", f"{source}/.", str(staging)], check=False,
                                capture_output=True).returncode == 0
        if not linked:
            shutil.rmtree(staging)
            staging.mkdir()
            subprocess.run(["cp", "-a", f"{source}/.", str(staging)], check=True)
        for path, dirs, files in os.walk(staging):
            os.chown(path, uid, gid)  # new folders (a hard-linked file stays root's, 0644/0755)
            os.chmod(path, 0o755)
            if not linked:
                for name in [*dirs, *files]:
                    with contextlib.suppress(OSError):
                        os.chown(os.path.join(path, name), uid, gid, follow_symlinks=False)
        promote(staging, final, spec)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def remote_env(cli: Cli, bin_folder: Path, home: Path, model_url: str) -> dict[str, str]:
    """The run's environment for ``cli`` on the host: the e2e tier's (telemetry and updates
    off, the fake model's URL and key, the CLI's config files in a throwaway HOME), with HOME
    and PATH as the remote account has them; ``home`` is handed to that account."""
    env = run_env(cli, home, model_url)
    env["PATH"] = f"{bin_folder}{os.pathsep}{SYSTEM_PATH}"
    env.pop("IS_SANDBOX", None)  # the remote account is not root
    account = remote_account()
    for path, dirs, files in os.walk(home):
        os.chown(path, account.pw_uid, account.pw_gid)
        for name in [*dirs, *files]:
            os.chown(os.path.join(path, name), account.pw_uid, account.pw_gid)
    return env
