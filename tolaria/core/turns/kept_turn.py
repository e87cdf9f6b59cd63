"""What the turns on a kept process share: find or spawn the conversation's keeper, lend it to
the turn, give it back (docs/adr/0009-kept-agent-processes.md).

The turn is still a run in the registry under its own stream id; only the agent process is not
the turn's: it carries the keeper's stream id as its marker and outlives the turn. A kept turn
*has* a ``KeptProcess`` (composition, not a mixin): ``KeptStreamTurn`` and ``KeptAcpTurn`` stay
plain subclasses of their per-turn kinds and hand their ``execute`` to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tolaria.core.adapters.manifest import build_argv
from tolaria.core.events import STOP_CANCELLED, Done, Survivor
from tolaria.core.process import proctree, tracking, watchdog
from tolaria.core.process.registry import RUNNING
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns import mcp_setup
from tolaria.core.turns.keeper import Keeper, KeeperPool, signature_of
from tolaria.core.turns.process_turn import ProcessTurn, bind_process
from tolaria.core.turns.spawn import build_env, spawn_agent

#: A kept turn's own supervision: (the keeper, the working folder, whether it was just spawned).
Supervise = Callable[[Keeper, str, bool], Awaitable[Done]]


class KeptProcess:
    """One turn's use of its conversation's kept agent process."""

    def __init__(self, turn: ProcessTurn, keepers: KeeperPool, *, reads_stdout: bool,
                 ready_when_spawned: bool,
                 on_spawned: Callable[[Keeper], None] | None = None) -> None:
        self.turn = turn
        self.keepers = keepers
        #: Whether the keeper reads stdout itself (Claude) or the ACP SDK does.
        self.reads_stdout = reads_stdout
        #: Whether a just-spawned process can be kept before its first turn ran (Claude: yes;
        #: an ACP agent whose ``initialize`` never ran: no).
        self.ready_when_spawned = ready_when_spawned
        #: Sets up the protocol on a freshly spawned keeper (ACP: the SDK connection).
        self.on_spawned = on_spawned
        #: The keeper lent to this turn, and (pid, create time) of its processes at turn start.
        self.keeper: Keeper | None = None
        self.before: set[tuple[int, float]] = set()

    @property
    def key(self) -> str:
        assert self.turn.request.keep_key is not None
        return self.turn.request.keep_key

    async def execute(self, supervise: Supervise) -> Done:
        """The turn's ``execute``: the keeper found or spawned, then ``supervise`` on it."""
        turn = self.turn
        cwd = turn._start()
        if isinstance(cwd, Done):
            return cwd
        signature = signature_of(turn.manifest, cwd, turn.request.env, turn.request.mcp_servers,
                                 turn.permission_mode)
        keeper = self.keepers.get(self.key)
        if keeper is not None and keeper.busy:
            return turn._fail(f"the conversation {self.key} already has a turn running on its "
                              f"{turn.manifest.name} process")
        if keeper is not None and (keeper.signature != signature or not keeper.alive):
            # Another agent, folder or environment (or the agent is gone): a fresh process.
            # Shielded: a cancelled caller must not leave the old tree half ended.
            if keeper.alive:
                await asyncio.shield(self.keepers.close(self.key))
            else:
                await asyncio.shield(self.keepers.kill(keeper, turn.grace_s))
            keeper = None
        if keeper is not None:
            turn.mcp = keeper.mcp  # (ACP: a fresh session on it needs the keeper's servers)
        fresh = keeper is None
        if keeper is None:
            spawned = await self._spawn(cwd, signature)
            if isinstance(spawned, Done):
                return spawned
            keeper = spawned
        if turn.run.stop_requested:
            # Stopped before the prompt went out: nothing runs in the agent, it stays (unless
            # it never got ready for a turn).
            if fresh and not self.ready_when_spawned:
                turn.survivors = await asyncio.shield(self.keepers.kill(keeper, turn.grace_s))
            return turn._done(STOP_CANCELLED)
        self.keepers.acquire(keeper, turn)
        self.keeper = keeper
        try:
            self.before = keeper.snapshot()
            turn.registry.transition(turn.run, RUNNING)
            return await supervise(keeper, cwd, fresh)
        finally:
            self.keepers.release(keeper)

    async def _spawn(self, cwd: str, signature: tuple[object, ...]) -> Keeper | Done:
        turn, manifest = self.turn, self.turn.manifest
        keeper_sid = new_stream_id()
        # The permission mode's variables and flags, as a one-shot run gets them
        # (ProcessTurn.execute): a kept process must not run with more rights than asked.
        mode_env = manifest.permission_env.get(turn.permission_mode, {})
        env = build_env(manifest, keeper_sid, {**mode_env, **turn.request.env})
        # The servers belong to the kept process: its marker, its life (ADR 0019).
        mcp = mcp_setup.prepare(turn.request, env, keeper_sid, turn.permission_mode, turn.emit,
                                turn.run.stream_id)
        if isinstance(mcp, str):
            return turn._fail(mcp)
        spawned = await self._spawn_with(cwd, signature, keeper_sid, env, mcp)
        if isinstance(spawned, Done):
            mcp.close()
        return spawned

    async def _spawn_with(self, cwd: str, signature: tuple[object, ...], keeper_sid: str,
                          env: dict[str, str], mcp: mcp_setup.McpSetup) -> Keeper | Done:
        turn, manifest = self.turn, self.turn.manifest
        session = self.resume_session()
        argv = build_argv(manifest, prompt=turn.request.prompt, cwd=cwd, session_id=session,
                          mode=turn.permission_mode, extra=mcp.launched.args)
        env.update(mcp.launched.env)
        turn.mcp = mcp
        found = await turn._find_program(argv[0], env)
        if isinstance(found, Done):
            return found
        argv, env = found.argv(argv[1:]), found.environment(env)
        # Before the spawn: should the app die from here on, its watchdog ends the keeper
        # (what carries its marker, and what its tracking file names: tracking.py).
        track = str(tracking.path_for(keeper_sid))
        watchdog.run_started(keeper_sid, track)
        try:
            # Own session, as every agent (ADR 0002); the keeper's marker, not the turn's.
            proc, protocol, transport = await spawn_agent(argv, cwd=cwd, env=env,
                                                          stdin=asyncio.subprocess.PIPE)
        except OSError as exc:
            watchdog.run_ended(keeper_sid)
            tracking.forget(track)
            return turn._cannot_start(argv[0], exc)
        proctree.keeper_started()
        root = bind_process(proc.pid)
        keeper = Keeper(self.key, keeper_sid, signature,
                        proc, protocol, transport, root, max_line=turn.max_line,
                        session_id=session, track_path=track, mcp=mcp)
        keeper.start_tracking()
        keeper.start_readers(stdout=self.reads_stdout)
        self.keepers.add(keeper)
        if self.on_spawned is not None:
            self.on_spawned(keeper)
        return keeper

    def resume_session(self) -> str | None:
        """The session a fresh process continues: the caller's, else the killed keeper's."""
        return self.turn.request.session_id or self.keepers.session_id(self.key)

    async def end_turn(self, keep: bool, *, root_had_grace: bool = False) -> list[Survivor]:
        """Keep the agent and end what the turn left behind, or end the keeper's whole tree
        (the turn's ``_end_processes``)."""
        keeper = self.keeper
        assert keeper is not None
        if keep and keeper.alive:
            return await keeper.end_leftovers(self.before, self.turn.grace_s)
        return await self.keepers.kill(keeper, self.turn.grace_s, root_had_grace=root_had_grace)
