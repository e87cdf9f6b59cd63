"""How every agent process is started, per turn or kept: its environment, its own session, and
the protocol that tells us the moment it exits.

A leaf under the turn kinds and the keeper (ADR 0002: argv lists, no shell, own session, the
run's marker in the environment).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Mapping, Sequence

from tolaria.core.adapters.manifest import Manifest, no_nul
from tolaria.core.process import proctree
from tolaria.support.redact import remember_secrets


class ExitProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Tells us the moment the agent exits, even while a grandchild still holds its stdout.

    (On Python 3.11 ``Process.wait()`` only returns once every pipe is closed.)
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


def build_env(manifest: Manifest, stream_id: str, extra: Mapping[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update({k: os.path.expandvars(v) for k, v in manifest.env.items()})
    env.update(extra)
    # Every process of the run inherits these markers, so the tree can be found even after a
    # tool leaves it with setsid + double fork, and leak checks can name the run.
    env = proctree.mark_env(env, stream_id)
    # Secrets set for the agent only (its [env], Preferences) are masked like the environment's
    # own: in its stderr lines and errors, the logs and crash reports (tolaria/support/redact.py).
    remember_secrets(env)
    return {no_nul(k): no_nul(v) for k, v in env.items()}  # a TOML "\u0000" must not crash


def resolve_program(program: str, env: Mapping[str, str]) -> str | None:
    """``program`` on ``env``'s PATH only (or as given, with a folder); see ``locate`` for the
    full search that spawning uses."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) and os.path.isfile(program) else None
    return shutil.which(program, path=env.get("PATH", os.defpath))


async def spawn_agent(argv: Sequence[str], *, cwd: str, env: Mapping[str, str], stdin: int
                      ) -> tuple[asyncio.subprocess.Process, ExitProtocol,
                                 asyncio.SubprocessTransport]:
    """Start ``argv`` with stdout and stderr piped; raises OSError when it cannot start.

    start_new_session: the agent gets its own session and process group, so a Ctrl+C in our
    terminal does not reach it and its group can be signalled as a whole. The child is
    remembered as ours at once (the caller forgets it when the process is done with).
    """
    loop = asyncio.get_running_loop()
    # PWD names the folder the agent runs in, not ours: opencode (and shells) take it over the
    # real working directory, and ran in the folder Tolaria was started from.
    env = {**env, "PWD": os.path.abspath(cwd)}
    transport, protocol = await loop.subprocess_exec(
        lambda: ExitProtocol(limit=2**16, loop=loop), *argv,
        stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=cwd, env=env, start_new_session=True)
    proc = asyncio.subprocess.Process(transport, protocol, loop)
    proctree.remember_own_child(proc.pid)
    return proc, protocol, transport
