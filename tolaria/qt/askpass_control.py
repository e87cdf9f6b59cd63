"""The window's side of ssh's questions (ADR 0033): the askpass desk, its facts as the bridge's
signals, the user's answers back to it, and whether this ssh can be asked at all.

The engine calls ``env_for`` while it builds a remote turn (``TurnEngine.ssh_askpass``): an
OpenSSH before 8.4 (no ``SSH_ASKPASS_REQUIRE``) keeps BatchMode, said once in the window.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from PySide6.QtCore import QObject

from tolaria.core.remote.askpass_desk import AskpassDesk, SshQuestion, ssh_problem
from tolaria.core.remote.hosts import Target
from tolaria.qt.bridge import Bridge

#: ``AskpassControl.env_for``: conversation id (0: asked in a dialog), ssh command, host.
EnvFor = Callable[[int, str, str], dict[str, str]]


def asking(target: Target, env_for: EnvFor | None, conversation_id: int,
           host: str) -> tuple[Target, bool]:
    """``target`` with the window's askpass where ssh can be asked (a look, a listing, an
    import from a host), and whether it may now wait for the user's answer (the caller's
    time limit then waits as long as the question)."""
    if env_for is None or target.ssh is None:
        return target, False
    env = env_for(conversation_id, target.ssh_command, host)
    if not env:
        return target, False
    return dataclasses.replace(target, interactive=True, askpass_env=env), True


class AskpassControl(QObject):
    def __init__(self, bridge: Bridge, parent: QObject | None = None, *,
                 timeout_s: float | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        options = {} if timeout_s is None else {"timeout_s": timeout_s}
        self.desk = AskpassDesk(self._on_desk_question, bridge.ssh_question_closed.emit,
                                **options)
        #: ssh command -> why it cannot be asked (None: it can); ``ssh -V`` runs once each.
        self._problems: dict[str, str | None] = {}

    async def start(self) -> None:
        try:
            await self.desk.start()
        except OSError as exc:
            self.desk.problem = f"ssh's questions cannot reach the window: {exc}"
        if self.desk.problem is not None:
            self.bridge.problem_reported.emit(self.desk.problem)

    async def close(self) -> None:
        await self.desk.close()

    def env_for(self, conversation_id: int, ssh_command: str, host: str = "") -> dict[str, str]:
        if self.desk.problem is not None:
            return {}
        if ssh_command not in self._problems:
            problem = self._problems[ssh_command] = ssh_problem(ssh_command)
            if problem is not None:
                self.bridge.problem_reported.emit(problem)
        if self._problems[ssh_command] is not None:
            return {}
        return self.desk.env_for(conversation_id, host)

    def answer(self, question_id: str, answer: str) -> None:
        """The user's answer ("yes" to a host key, or the typed passphrase): sent, not kept."""
        self.desk.answer(question_id, answer)

    def refuse(self, question_id: str) -> None:
        self.desk.refuse(question_id)

    def _on_desk_question(self, question: SshQuestion) -> None:
        self.bridge.ssh_question_asked.emit(question)
