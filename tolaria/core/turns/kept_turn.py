"""What the turns on a kept process share: find or spawn the conversation's keeper, hand it to
the turn, give it back (docs/adr/0009-kept-agent-processes.md).

The turn is still a run in the registry under its own stream id; only the agent process is not
the turn's: it carries the keeper's stream id as its marker and outlives the turn.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import psutil

from tolaria.core.adapters.manifest import substitute
from tolaria.core.events import STOP_CANCELLED, Done
from tolaria.core.process import proctree, watchdog
from tolaria.core.programs import locate
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.keeper import Keeper, KeeperPool, signature_of
from tolaria.core.turns.process_turn import ExitProtocol, ProcessTurn, build_env

if TYPE_CHECKING:
    from tolaria.core.events import Survivor


class KeptTurnMixin(ProcessTurn):
    """Mixed in front of a per-turn class (``StreamInputTurn``, ``AcpTurn``)."""

    #: Set by the runner before ``execute``.
    keepers: KeeperPool
    #: Whether the keeper reads stdout itself (Claude) or the ACP SDK does.
    keeper_reads_stdout = True
    #: Whether a just-spawned process can be kept before its first turn ran (Claude: yes; an
    #: ACP agent whose ``initialize`` never ran: no).
    ready_when_spawned = True

    @property
    def key(self) -> str:
        assert self.request.keep_key is not None
        return self.request.keep_key

    async def execute(self) -> Done:
        cwd = self._start()
        if isinstance(cwd, Done):
            return cwd
        signature = signature_of(self.manifest, cwd, self.request.env)
        keeper = self.keepers.get(self.key)
        if keeper is not None and keeper.busy:
            return self._fail(f"the conversation {self.key} already has a turn running on its "
                              f"{self.manifest.name} process")
        if keeper is not None and (keeper.signature != signature or not keeper.alive):
            # Another agent, folder or environment (or the agent is gone): a fresh process.
            # Shielded: a cancelled caller must not leave the old tree half ended.
            if keeper.alive:
                await asyncio.shield(self.keepers.close(self.key))
            else:
                await asyncio.shield(self.keepers.kill(keeper, self.grace_s))
            keeper = None
        fresh = keeper is None
        if keeper is None:
            spawned = await self._spawn_keeper(cwd, signature)
            if isinstance(spawned, Done):
                return spawned
            keeper = spawned
        if self.run.stop_requested:
            # Stopped before the prompt went out: nothing runs in the agent, it stays (unless
            # it never got ready for a turn).
            if fresh and not self.ready_when_spawned:
                self.survivors = await asyncio.shield(self.keepers.kill(keeper, self.grace_s))
            return self._done(STOP_CANCELLED)
        self.keepers.acquire(keeper, self)
        try:
            return await self._supervise_kept(keeper, cwd, fresh)
        finally:
            self.keepers.release(keeper)

    async def _spawn_keeper(self, cwd: str,
                            signature: tuple[object, str, dict[str, str]]) -> Keeper | Done:
        manifest = self.manifest
        keeper_sid = new_stream_id()
        argv = substitute(manifest.command, prompt=self.request.prompt, cwd=cwd)
        session = self.resume_session()
        if session and manifest.resume:
            argv += substitute(manifest.resume, session_id=session)
        env = build_env(manifest, keeper_sid, self.request.env)
        try:
            found = await self._locate(argv[0], env)
        except locate.ProgramNotFound as exc:
            hint = f"; install it with: {manifest.install_hint}" if manifest.install_hint else ""
            return self._fail(f"{manifest.name}: {exc}{hint}")
        if found is None or self.run.stop_requested:
            return self._done(STOP_CANCELLED)
        argv, env = found.argv(argv[1:]), found.environment(env)
        loop = asyncio.get_running_loop()
        # Before the spawn: should the app die from here on, its watchdog ends the keeper.
        watchdog.run_started(keeper_sid)
        try:
            # Own session, as every agent (ADR 0002); the keeper's marker, not the turn's.
            transport, protocol = await loop.subprocess_exec(
                lambda: ExitProtocol(limit=2**16, loop=loop), *argv,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
        except OSError as exc:
            watchdog.run_ended(keeper_sid)
            return self._fail(f"{manifest.name}: cannot start {argv[0]}: {exc.strerror or exc}")
        proc = asyncio.subprocess.Process(transport, protocol, loop)
        proctree.remember_own_child(proc.pid)
        proctree.keeper_started()
        try:
            root: psutil.Process | None = psutil.Process(proc.pid)
        except psutil.Error:
            root = None
        keeper = Keeper(self.key, keeper_sid, signature,  # type: ignore[arg-type]
                        proc, protocol, transport, root, max_line=self.max_line,
                        session_id=session)
        keeper.start_readers(stdout=self.keeper_reads_stdout)
        self.keepers.add(keeper)
        self._on_new_keeper(keeper)
        return keeper

    def resume_session(self) -> str | None:
        """The session a fresh process continues: the caller's, else the killed keeper's."""
        return self.request.session_id or self.keepers.session_id(self.key)

    # -- hooks -----------------------------------------------------------------------------------
    def _on_stdout(self, line: str) -> None:
        """A line of the kept process's stdout while this turn owns it."""
        raise NotImplementedError

    def _on_new_keeper(self, keeper: Keeper) -> None:
        """Set up the protocol on a freshly spawned keeper (ACP: the SDK connection)."""

    async def _supervise_kept(self, keeper: Keeper, cwd: str, fresh: bool) -> Done:
        raise NotImplementedError

    # -- ending the turn ---------------------------------------------------------------------------
    async def _end_turn(self, keeper: Keeper, before: set[tuple[int, float]], keep: bool,
                        root_had_grace: bool = False) -> list[Survivor]:
        """Keep the agent and end what the turn left behind, or end the keeper's whole tree."""
        if keep and keeper.alive:
            return await keeper.end_leftovers(before, self.grace_s)
        return await self.keepers.kill(keeper, self.grace_s, root_had_grace=root_had_grace)
