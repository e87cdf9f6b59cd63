"""Where ssh's own questions reach the window (ADR 0033): the desk behind ``SSH_ASKPASS``.

The window starts one desk: a private runtime folder (0700) holding a Unix socket and the
``askpass`` wrapper script (``SSH_ASKPASS`` must be one program path). Each remote turn gets an
environment for its ssh (``env_for``): the wrapper, ``SSH_ASKPASS_REQUIRE=force``, the socket
and a fresh token bound to the chat. ssh asks -> the askpass program connects with the token ->
``on_question`` gets a ``SshQuestion`` with ssh's words verbatim -> ``answer`` (or ``refuse``)
sends the reply. A question nobody answers within ``timeout_s`` is refused; one whose askpass
went away (the turn stopped, ssh gave up) is closed. The answer is held only while it is sent:
never logged, stored or kept.

No Qt; asyncio. Unix only (AF_UNIX): elsewhere ``problem`` says why and ssh keeps BatchMode.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from tolaria.core.remote.askpass import SOCKET_ENV, TOKEN_ENV, WAIT_S_ENV

#: OpenSSH reads SSH_ASKPASS_REQUIRE from 8.4 on: before it, ssh would not use the askpass
#: program without a DISPLAY, and would ask on a terminal instead.
MIN_OPENSSH = (8, 4)
DEFAULT_TIMEOUT_S = 300.0
#: What a question wants: "yes/no" buttons, a masked "secret" field, or a "notice" to read.
KIND_CONFIRM, KIND_SECRET, KIND_NOTICE = "confirm", "secret", "notice"
_MAX_REQUEST = 64 * 1024
_VERSION = re.compile(r"OpenSSH_(?:for_Windows_)?(\d+)\.(\d+)")


@dataclass(frozen=True)
class SshQuestion:
    """One question of ssh: whose chat asked it, ssh's words, and what answer it wants."""

    id: str
    conversation_id: int
    prompt: str
    kind: str
    #: The host ssh connects to, when the asker said (a look at a host's agents, ADR 0034).
    host: str = ""


def question_kind(prompt: str, hint: str) -> str:
    """How to answer: ssh's host-key question ("…(yes/no/[fingerprint])?") and a "confirm"
    are Yes/No; a "none" is a notice; anything else (passphrase, password, PIN) is secret."""
    if hint == "confirm" or "(yes/no" in prompt:
        return KIND_CONFIRM
    if hint == "none":
        return KIND_NOTICE
    return KIND_SECRET


def openssh_version(ssh_command: str = "ssh") -> tuple[int, int] | None:
    """``ssh -V``'s version (None: not OpenSSH, or it cannot run)."""
    argv = shlex.split(ssh_command) or ["ssh"]
    try:
        done = subprocess.run([*argv, "-V"], capture_output=True, text=True, timeout=10,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    found = _VERSION.search(done.stderr + done.stdout)
    return (int(found[1]), int(found[2])) if found else None


def ssh_problem(ssh_command: str = "ssh") -> str | None:
    """Why the window cannot answer this ssh's questions (None: it can), in one line."""
    version = openssh_version(ssh_command)
    if version is None:
        return (f"{ssh_command} -V does not say OpenSSH: its questions (host key, passphrase) "
                "cannot be answered in the window, so it runs with BatchMode")
    if version < MIN_OPENSSH:
        return (f"ssh is OpenSSH {version[0]}.{version[1]}: the window answers ssh's questions "
                "(host key, passphrase) from OpenSSH 8.4 on; until then ssh runs with "
                "BatchMode and refuses them")
    return None


class AskpassDesk:
    """The window's askpass socket and the questions open on it."""

    def __init__(self, on_question: Callable[[SshQuestion], None],
                 on_closed: Callable[[str], None], *,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.on_question = on_question
        #: A question went away without the user (timeout, ssh gone): its id.
        self.on_closed = on_closed
        self.timeout_s = timeout_s
        self.folder = ""
        self.socket_path = ""
        self.program = ""
        #: Why the desk cannot serve (None once it listens).
        self.problem: str | None = "not started"
        self._server: asyncio.AbstractServer | None = None
        self._tokens: dict[str, int] = {}
        #: token -> the host named by ``env_for`` (only a look names it).
        self._hosts: dict[str, str] = {}
        self._open: dict[str, asyncio.Future[str | None]] = {}
        self._ids = itertools.count(1)

    async def start(self) -> None:
        if sys.platform == "win32":
            self.problem = "ssh's questions are answered in the window on Linux and macOS only"
            return
        base = tempfile.gettempdir()
        if len(os.fsencode(base)) > 60:  # a socket path must fit sun_path (104 bytes)
            base = "/tmp"
        self.folder = tempfile.mkdtemp(prefix="tolaria-askpass-", dir=base)  # 0700, ours
        self.socket_path = os.path.join(self.folder, "s")
        self.program = os.path.join(self.folder, "askpass")
        fd = os.open(self.program, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("#!/bin/sh\n"
                     f"exec {shlex.quote(sys.executable)} -m tolaria.core.remote.askpass "
                     '"$@"\n')
        self._server = await asyncio.start_unix_server(self._serve, path=self.socket_path)
        os.chmod(self.socket_path, 0o600)
        self.problem = None

    def env_for(self, conversation_id: int, host: str = "") -> dict[str, str]:
        """The environment of one turn's ssh: asks go to ``conversation_id``'s chat (0: no
        chat, a look at ``host`` from elsewhere: the window asks in a dialog)."""
        if self.problem is not None:
            return {}
        token = secrets.token_hex(16)
        self._tokens[token] = conversation_id
        if host:
            self._hosts[token] = host
        return {"SSH_ASKPASS": self.program, "SSH_ASKPASS_REQUIRE": "force",
                SOCKET_ENV: self.socket_path, TOKEN_ENV: token,
                WAIT_S_ENV: str(self.timeout_s + 30)}

    def answer(self, question_id: str, answer: str) -> None:
        future = self._open.get(question_id)
        if future is not None and not future.done():
            future.set_result(answer)

    def refuse(self, question_id: str) -> None:
        future = self._open.get(question_id)
        if future is not None and not future.done():
            future.set_result(None)

    def open_ids(self) -> list[str]:
        return list(self._open)

    async def close(self) -> None:
        for future in self._open.values():
            if not future.done():
                future.set_result(None)
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.problem = "closed"

    # -- one askpass connection ------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        question_id = ""
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            request = json.loads(line[:_MAX_REQUEST]) if line.endswith(b"\n") else None
            conversation_id = self._owner(request)
            if conversation_id is None or not isinstance(request, dict):
                return  # a wrong token or garbage: closed unanswered (askpass refuses)
            prompt, hint = str(request.get("prompt", "")), str(request.get("hint", ""))
            question_id = f"ssh-question-{next(self._ids)}"
            future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
            self._open[question_id] = future
            self.on_question(SshQuestion(question_id, conversation_id, prompt,
                                         question_kind(prompt, hint),
                                         self._hosts.get(str(request["token"]), "")))
            gone: asyncio.Future[bytes] = asyncio.ensure_future(reader.read(1))  # EOF: it left
            try:
                await asyncio.wait((future, gone), timeout=self.timeout_s,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                gone.cancel()
            answered = future.done() and not future.cancelled()
            answer = future.result() if answered else None
            reply = {"ok": True, "answer": answer} if answer is not None else {"ok": False}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
            if not answered:
                self.on_closed(question_id)
        except (TimeoutError, OSError, ValueError):
            if question_id:
                self.on_closed(question_id)
        finally:
            if question_id:
                future = self._open.pop(question_id)
                if not future.done():
                    future.cancel()
            writer.close()

    def _owner(self, request: object) -> int | None:
        if not isinstance(request, dict) or not isinstance(request.get("token"), str):
            return None
        token = request["token"]
        for known, conversation_id in self._tokens.items():
            if hmac.compare_digest(known, token):
                return conversation_id
        return None
