"""The askpass desk (ADR 0033) with the real askpass program run through its wrapper script, as
ssh runs it: the answer reaches stdout only when given, everything else is a refusal (exit 1),
a wrong token never reaches the window, and a question nobody answers is refused and closed."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from pathlib import Path

from helpers import async_test, wait_until

from tolaria.core.remote.askpass import TOKEN_ENV
from tolaria.core.remote.askpass_desk import (
    KIND_CONFIRM,
    KIND_NOTICE,
    KIND_SECRET,
    AskpassDesk,
    SshQuestion,
    question_kind,
    ssh_problem,
)

HOST_KEY_PROMPT = ("The authenticity of host '[127.0.0.1]:2222 ([127.0.0.1]:2222)' can't be "
                   "established.\nED25519 key fingerprint is SHA256:abc.\nAre you sure you want "
                   "to continue connecting (yes/no/[fingerprint])? ")


class Desk:
    def __init__(self, timeout_s: float = 30) -> None:
        self.asked: list[SshQuestion] = []
        self.closed: list[str] = []
        self.desk = AskpassDesk(self.asked.append, self.closed.append, timeout_s=timeout_s)


async def run_askpass(env: dict[str, str], prompt: str, hint: str = "",
                      ) -> asyncio.subprocess.Process:
    full = {k: v for k, v in os.environ.items() if not k.startswith("SSH_ASKPASS")}
    full.update(env)
    if hint:
        full["SSH_ASKPASS_PROMPT"] = hint
    return await asyncio.create_subprocess_exec(
        env["SSH_ASKPASS"], prompt, env=full, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def started(timeout_s: float = 30) -> Desk:
    d = Desk(timeout_s)
    await d.desk.start()
    assert d.desk.problem is None
    return d


async def answered_with(d: Desk, env: dict[str, str], prompt: str,
                        act: Callable[[SshQuestion], None]) -> tuple[int, bytes]:
    before = len(d.asked)
    proc = await run_askpass(env, prompt)
    await wait_until(lambda: len(d.asked) > before, within=20, what="the question")
    act(d.asked[-1])
    out, _err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode is not None
    return proc.returncode, out


@async_test
async def test_an_answer_goes_to_ssh_and_nowhere_else() -> None:
    d = await started()
    try:
        folder = os.stat(d.desk.folder)
        assert stat.S_IMODE(folder.st_mode) == 0o700
        assert stat.S_IMODE(os.stat(d.desk.program).st_mode) == 0o700
        env = d.desk.env_for(7)
        assert env["SSH_ASKPASS_REQUIRE"] == "force"
        code, out = await answered_with(d, env, HOST_KEY_PROMPT,
                                        lambda q: d.desk.answer(q.id, "yes"))
        assert (code, out) == (0, b"yes\n")
        question = d.asked[0]
        assert question.conversation_id == 7
        assert question.prompt == HOST_KEY_PROMPT  # ssh's words, verbatim
        assert question.kind == KIND_CONFIRM
        code, out = await answered_with(d, env, "Enter passphrase for key '/k': ",
                                        lambda q: d.desk.answer(q.id, "s3cret pass"))
        assert (code, out) == (0, b"s3cret pass\n")
        assert d.asked[1].kind == KIND_SECRET
        assert d.closed == [] and d.desk.open_ids() == []
    finally:
        await d.desk.close()
    assert not os.path.exists(d.desk.folder)


@async_test
async def test_a_refusal_is_exit_1() -> None:
    d = await started()
    try:
        code, out = await answered_with(d, d.desk.env_for(1), HOST_KEY_PROMPT,
                                        lambda q: d.desk.refuse(q.id))
        assert (code, out) == (1, b"")
    finally:
        await d.desk.close()


@async_test
async def test_a_wrong_token_never_reaches_the_window() -> None:
    d = await started()
    try:
        env = {**d.desk.env_for(1), TOKEN_ENV: "0" * 32}
        proc = await run_askpass(env, "Password: ")
        out, _err = await asyncio.wait_for(proc.communicate(), 20)
        assert (proc.returncode, out) == (1, b"")
        assert d.asked == []
    finally:
        await d.desk.close()


@async_test
async def test_nobody_answers_a_refusal_and_the_card_closes() -> None:
    d = await started(timeout_s=0.5)
    try:
        proc = await run_askpass(d.desk.env_for(3), "Password: ")
        out, _err = await asyncio.wait_for(proc.communicate(), 20)
        assert (proc.returncode, out) == (1, b"")
        assert [q.id for q in d.asked] == d.closed
    finally:
        await d.desk.close()


@async_test
async def test_an_askpass_that_goes_away_closes_its_question() -> None:
    d = await started()
    try:
        proc = await run_askpass(d.desk.env_for(3), "Password: ")
        await wait_until(lambda: d.asked, within=20, what="the question")
        proc.kill()  # ssh gave up, or the turn was stopped
        await proc.wait()
        await wait_until(lambda: d.closed, within=10, what="the question closed")
        assert d.closed == [d.asked[0].id] and d.desk.open_ids() == []
    finally:
        await d.desk.close()


def test_question_kinds() -> None:
    assert question_kind(HOST_KEY_PROMPT, "") == KIND_CONFIRM
    assert question_kind("Allow use of key?", "confirm") == KIND_CONFIRM
    assert question_kind("Confirm user presence for key", "none") == KIND_NOTICE
    assert question_kind("me@box's password: ", "") == KIND_SECRET


def test_an_old_or_unknown_ssh_keeps_batchmode(tmp_path: Path) -> None:
    old = tmp_path / "oldssh"
    old.write_text("#!/bin/sh\necho 'OpenSSH_8.2p1 Ubuntu-4ubuntu0.5, OpenSSL 1.1.1f' >&2\n")
    old.chmod(0o755)
    problem = ssh_problem(str(old))
    assert problem is not None and "OpenSSH 8.2" in problem and "BatchMode" in problem
    assert "\n" not in problem
    problem = ssh_problem("/no/such/ssh")
    assert problem is not None and "BatchMode" in problem


def test_the_askpass_environment_is_for_the_local_ssh_only() -> None:
    """``Target.askpass_env`` goes to the link (whose ssh inherits it), never into the spec's
    environment that is sent to the host."""
    import json

    from tolaria.core.remote.hosts import parse_destination
    from tolaria.core.remote.launch import RemoteLaunch

    askpass = {"SSH_ASKPASS": "/run/x/askpass", "SSH_ASKPASS_REQUIRE": "force",
               TOKEN_ENV: "f" * 32}
    target = parse_destination("devbox", interactive=True, askpass_env=askpass)
    launch = RemoteLaunch(target, "ai-agent-stream-test", 1.0)
    try:
        argv, env = launch.prepare("claude", ["claude", "-p", "hi"], None,
                                   {**os.environ, "TOLARIA_STREAM_ID": "ai-agent-stream-test"})
        assert {k: env[k] for k in askpass} == askpass
        with open(launch.spec_path, encoding="utf-8") as fh:
            spec = json.load(fh)
        assert not any("ASKPASS" in key for key in spec["env"])
        assert "BatchMode=yes" not in spec["transport"]
        assert argv[-1] == launch.spec_path
    finally:
        launch.close()
