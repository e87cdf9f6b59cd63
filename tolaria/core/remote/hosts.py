"""Where a run goes: a host as ``ssh`` accepts it, or a command target (a command prefix such as
``docker exec -i box``), and the argv that reaches the supervisor there (ADR 0026).

No Qt, no asyncio: the window's host picker and ``tolaria run --host`` both parse with
``parse_destination`` and hand the resulting ``Target`` to the turn (``RunRequest.target``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: The prefix of a command target in a destination: ``exec:docker exec -i box``.
EXEC_PREFIX = "exec:"
DEFAULT_SSH = "ssh"
DEFAULT_PYTHON = "python3"
#: Seconds of silence from Tolaria after which the supervisor ends the run's tree.
DEFAULT_HEARTBEAT_S = 3.0
#: ssh notices a dead link after ServerAliveInterval * ServerAliveCountMax seconds.
SERVER_ALIVE_S = 5
CONNECT_TIMEOUT_S = 10
#: Keep running when disconnected: how long a run goes on with nobody attached, how much of its
#: output the supervisor keeps for a reattach, and how long the link retries to reconnect.
DEFAULT_KEEP_S = 24 * 3600.0
DEFAULT_BUFFER_BYTES = 8 << 20
DEFAULT_RECONNECT_S = 120.0

_HOST = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.%-]+)$")
_USER = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.@-]*$")


class BadDestination(ValueError):
    """A destination that cannot be used, with the reason in one line."""


@dataclass(frozen=True)
class SshHost:
    """A host reached through the user's ``ssh``: an alias or host name, with an optional user
    and port (from ``user@host`` or ``ssh://user@host:port``)."""

    host: str
    user: str | None = None
    port: int | None = None

    @property
    def label(self) -> str:
        """How the host is named to the user (``tolaria streams``, errors)."""
        name = f"{self.user}@{self.host}" if self.user else self.host
        return f"{name}:{self.port}" if self.port else name


@dataclass(frozen=True)
class Target:
    """A run's destination with how to reach it (ssh settings or a command prefix)."""

    #: The ssh host, or None for a command target.
    ssh: SshHost | None = None
    #: A command target's prefix (``docker exec -i box``); the supervisor's argv follows it.
    prefix: tuple[str, ...] = ()
    #: The ssh program (a path or a command with options, split like a shell would).
    ssh_command: str = DEFAULT_SSH
    #: ``ssh -F FILE``: the ssh config file to use instead of ``~/.ssh/config``.
    ssh_config: str | None = None
    #: Whether a window can answer ssh's questions (passphrase, host key): otherwise BatchMode.
    interactive: bool = False
    #: The Python that runs the supervisor on the host.
    python: str = DEFAULT_PYTHON
    #: The supervisor's cache folder there (None: ``~/.cache/tolaria/remote``).
    cache_dir: str | None = None
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    #: Per-host overrides: agent id -> the program's path on the host.
    programs: Mapping[str, str] = field(default_factory=dict)
    #: Per-host environment for every agent run there.
    env: Mapping[str, str] = field(default_factory=dict)
    #: The name the user gave it (a ``[hosts."NAME"]`` command target), for the label.
    name: str = ""
    #: The local ssh's environment for the window's askpass (ADR 0033): ``SSH_ASKPASS`` and
    #: its socket; for the ssh client only, never sent to the host.
    askpass_env: Mapping[str, str] = field(default_factory=dict)
    #: The chat's "keep running when disconnected": a lost link does not end the run there; the
    #: link reconnects and reattaches (ADR 0032).
    keep_running: bool = False
    keep_s: float = DEFAULT_KEEP_S
    buffer_bytes: int = DEFAULT_BUFFER_BYTES
    reconnect_s: float = DEFAULT_RECONNECT_S
    #: Attach to the kept run of the turn's stream id instead of starting one (after a restart),
    #: from this output offset.
    attach_offset: int | None = None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.ssh is not None:
            return self.ssh.label
        return EXEC_PREFIX + shlex.join(self.prefix)

    def argv(self, remote: Sequence[str]) -> list[str]:
        """The local argv that runs ``remote`` (the supervisor's bootstrap) on the target."""
        if self.ssh is None:
            return [*self.prefix, *remote]
        argv = shlex.split(self.ssh_command) or [DEFAULT_SSH]
        if self.ssh_config:
            argv += ["-F", self.ssh_config]
        argv += ["-T", "-o", f"ServerAliveInterval={SERVER_ALIVE_S}",
                 "-o", "ServerAliveCountMax=2", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}"]
        if not self.interactive:
            # No window to answer a question: ssh refuses instead of waiting on a prompt (an
            # unknown host key is refused, never accepted: StrictHostKeyChecking stays as set).
            argv += ["-o", "BatchMode=yes"]
        if self.ssh.port is not None:
            argv += ["-p", str(self.ssh.port)]
        if self.ssh.user is not None:
            argv += ["-l", self.ssh.user]
        # The remote side runs one string through the login shell: quoted word by word.
        return [*argv, "--", self.ssh.host, shlex.join(remote)]


def parse_host(text: str) -> SshHost:
    """``alias``, ``host``, ``user@host`` or ``ssh://[user@]host[:port]``; BadDestination
    otherwise (never an argument ssh would read as an option)."""
    spec = text.strip()
    if not spec:
        raise BadDestination("the host is empty; give an ssh alias, user@host or "
                             "ssh://user@host:port")
    if any(c.isspace() or not c.isprintable() for c in spec):
        raise BadDestination(f"the host {text!r} contains spaces or control characters")
    if spec.startswith("-"):
        raise BadDestination(f"the host {spec!r} starts with '-' (ssh would read it as an "
                             "option)")
    port: int | None = None
    if "://" in spec:
        scheme, _, rest = spec.partition("://")
        if scheme != "ssh":
            raise BadDestination(f"the host {spec!r} has the scheme {scheme!r}; only ssh:// "
                                 "is known")
        if "/" in rest.rstrip("/"):
            raise BadDestination(f"the host {spec!r} has a path; give the folder as the "
                                 "working folder instead")
        spec = rest.rstrip("/")
        hostport = spec.rpartition("@")[2]
        if hostport.startswith("["):
            close = hostport.find("]")
            after = hostport[close + 1:] if close >= 0 else ""
            if after.startswith(":"):
                port = _port(after[1:], text)
                spec = spec[:len(spec) - len(after)]
        elif ":" in hostport:
            name, _, number = hostport.rpartition(":")
            port = _port(number, text)
            spec = spec[:len(spec) - len(hostport)] + name
    user, at, host = spec.rpartition("@")
    if at and not _USER.match(user):
        raise BadDestination(f"the user name {user!r} in {text!r} is not valid")
    if not _HOST.match(host):
        raise BadDestination(f"the host name {host!r} in {text!r} is not valid")
    return SshHost(host.strip("[]") if host.startswith("[") else host, user or None, port)


def _port(number: str, text: str) -> int:
    if not number.isdigit() or not 0 < int(number) < 65536:
        raise BadDestination(f"the port {number!r} in {text!r} is not a port number (1-65535)")
    return int(number)


def parse_prefix(text: str) -> tuple[str, ...]:
    """A command target's prefix (``docker exec -i box``), split like a shell would."""
    try:
        words = tuple(shlex.split(text))
    except ValueError as exc:
        raise BadDestination(f"the command target {text!r} cannot be split: {exc}") from None
    if not words:
        raise BadDestination("the command target is empty; e.g. exec:docker exec -i CONTAINER")
    return words


def parse_destination(text: str, **settings: object) -> Target:
    """A destination as ``tolaria run --host`` takes it: an ssh host, or ``exec:PREFIX`` for a
    command target; ``settings`` are the other ``Target`` fields (ssh command, config...)."""
    if text.startswith(EXEC_PREFIX):
        return Target(prefix=parse_prefix(text[len(EXEC_PREFIX):]), **settings)  # type: ignore[arg-type]
    return Target(ssh=parse_host(text), **settings)  # type: ignore[arg-type]
