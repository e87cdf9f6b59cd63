"""ssh's questions in the window (ADR 0033) without an sshd: a chat on an ssh host whose
``ssh_command`` is a stand-in that behaves as ssh does with ``SSH_ASKPASS_REQUIRE=force`` (it
runs the askpass program it was given with the host-key question and acts on the answer). The
turn's ssh gets no BatchMode and the askpass environment; the card shows ssh's words and its
Yes reaches ssh as "yes"; No is ssh's refusal; the watchdog waits instead of counting silence;
an OpenSSH before 8.4 keeps BatchMode, said once. The real sshd version of these is
tests/remote/test_askpass_window.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, processes_of

from tolaria.core.adapters.manifest import Manifest
from tolaria.ui.chat.ssh_question import SshQuestions
from tolaria.ui.composer.notices import SSH_WAITING_TEXT

StartApp = Callable[..., AppDriver]
QUESTION = ("The authenticity of host 'devbox (10.0.0.2)' can't be established.\n"
            "ED25519 key fingerprint is SHA256:Xq9.\n"
            "Are you sure you want to continue connecting (yes/no/[fingerprint])? ")
FAKE_SSH = '''import json, os, subprocess, sys
if sys.argv[1:] == ["-V"]:
    sys.stderr.write("OpenSSH_%(version)s, OpenSSL 3.0.13\\\\n")
    sys.exit(0)
if any("tolaria-agents" in part for part in sys.argv):  # the picker's look: not asked here
    sys.stderr.write("Permission denied (publickey).\\n")
    sys.exit(255)
with open(%(out)r, "w") as fh:
    json.dump({"argv": sys.argv, "env": {k: v for k, v in os.environ.items()
                                          if "ASKPASS" in k}}, fh)
if "BatchMode=yes" in sys.argv:
    sys.stderr.write("Host key verification failed.\\\\n")
    sys.exit(255)
answer = subprocess.run([os.environ["SSH_ASKPASS"], %(question)r], capture_output=True,
                        text=True)
with open(%(out)r + ".answer", "w") as fh:
    fh.write(str(answer.returncode) + ":" + answer.stdout)
if answer.stdout != "yes\\\\n":
    sys.stderr.write("Host key verification failed.\\\\n")
else:
    sys.stderr.write("Permission denied (publickey).\\\\n")
sys.exit(255)
'''


def fake_ssh(home: Path, tmp_path: Path, version: str = "9.6p1") -> Path:
    out = tmp_path / "ssh-run.json"
    script = tmp_path / "fake_ssh.py"
    script.write_text(FAKE_SSH % {"version": version, "out": str(out), "question": QUESTION})
    (home / "settings.toml").write_text(
        f'[remote]\nssh_command = "{sys.executable} {script}"\n')
    return out


def answered(out: Path) -> bool:
    """The stand-in has written what askpass answered (it creates the file, then writes it)."""
    answer = Path(str(out) + ".answer")
    return answer.exists() and answer.read_text().count(":") == 1


def remote_chat(drv: AppDriver, qtbot: QtBot) -> int:
    drv.use_agent(Manifest(id="fake-remote", name="Fake agent (remote)",
                           protocol="claude-stream-json", command=("python3", "agent.py")))
    chat = drv.pane.conversation_id
    drv.app.controller.set_host(chat, "devbox")
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == "devbox")
    return chat


def asked(drv: AppDriver, qtbot: QtBot) -> SshQuestions:
    """A chat on devbox sends a prompt; its ssh asks (the card is shown)."""
    remote_chat(drv, qtbot)
    drv.send("hello")
    questions = drv.pane.ssh_questions
    qtbot.waitUntil(lambda: bool(questions.cards), timeout=20_000)
    return questions


def test_yes_in_the_card_reaches_ssh_and_no_batchmode(start_app: StartApp, home: Path,
                                                      tmp_path: Path, qtbot: QtBot) -> None:
    out = fake_ssh(home, tmp_path)
    drv = start_app()
    questions = asked(drv, qtbot)
    card = next(iter(questions.cards.values()))
    assert card.prompt.text() == QUESTION.rstrip()  # ssh's words, as ssh gave them
    assert card.yes.text() == "Yes" and card.no.text() == "No" and card.field is None
    assert drv.pane.watchdog.waiting, "waiting for the user, not silence"
    assert SSH_WAITING_TEXT in drv.pane.watchdog.text()  # ssh asks, not the agent
    ran = json.loads(out.read_text())
    assert "BatchMode=yes" not in ran["argv"]
    assert ran["env"]["SSH_ASKPASS_REQUIRE"] == "force"
    assert Path(ran["env"]["SSH_ASKPASS"]).parent.stat().st_mode & 0o777 == 0o700
    card.yes.click()
    assert not questions.cards
    qtbot.waitUntil(lambda: answered(out), timeout=20_000)
    assert Path(str(out) + ".answer").read_text() == "0:yes\n"
    turn = drv.wait_finished(timeout_ms=20_000)
    assert turn.status == "failed"  # the stand-in refuses the login after the host key


def test_no_is_a_refusal(start_app: StartApp, home: Path, tmp_path: Path,
                         qtbot: QtBot) -> None:
    out = fake_ssh(home, tmp_path)
    drv = start_app()
    questions = asked(drv, qtbot)
    next(iter(questions.cards.values())).no.click()
    qtbot.waitUntil(lambda: answered(out), timeout=20_000)
    assert Path(str(out) + ".answer").read_text() == "1:"
    turn = drv.wait_finished(timeout_ms=20_000)
    assert turn.status == "failed"
    assert "host key of devbox is unknown" in turn.text() or any(
        "host key of devbox is unknown" in getattr(e, "message", "")
        for e in drv.app.store.events(drv.stored_turn(turn.stream_id).id))


def test_an_old_openssh_keeps_batchmode_and_says_so(start_app: StartApp, home: Path,
                                                    tmp_path: Path, qtbot: QtBot) -> None:
    out = fake_ssh(home, tmp_path, version="8.2p1")
    drv = start_app()
    remote_chat(drv, qtbot)
    drv.send("hello")
    qtbot.waitUntil(lambda: "OpenSSH 8.2" in drv.window.statusBar().currentMessage(),
                    timeout=10_000)
    assert "BatchMode" in drv.window.statusBar().currentMessage()
    turn = drv.wait_finished(timeout_ms=20_000)
    assert turn.status == "failed"
    assert "BatchMode=yes" in json.loads(out.read_text())["argv"]
    assert not drv.pane.ssh_questions.cards


def test_a_question_in_a_chat_not_shown_is_said_and_waits_there(
        start_app: StartApp, home: Path, tmp_path: Path, qtbot: QtBot) -> None:
    fake_ssh(home, tmp_path)
    drv = start_app()
    chat = remote_chat(drv, qtbot)
    remote_pane = drv.pane
    drv.send("hello")
    drv.window.sidebar.new_host_button.new_chat_on_host_requested.emit("")  # another chat
    qtbot.waitUntil(lambda: drv.window.current_conversation_id() != chat)
    qtbot.waitUntil(lambda: bool(remote_pane.ssh_questions.cards), timeout=20_000)
    assert "ssh asks in" in drv.window.statusBar().currentMessage()
    assert not drv.pane.ssh_questions.cards, "asked in its own chat only"
    drv.window.open_conversation(chat)
    next(iter(remote_pane.ssh_questions.cards.values())).no.click()
    assert drv.wait_finished(timeout_ms=20_000).status == "failed"


def test_stop_while_ssh_asks_ends_it_all_and_closes_the_card(
        start_app: StartApp, home: Path, tmp_path: Path, qtbot: QtBot) -> None:
    fake_ssh(home, tmp_path)
    drv = start_app()
    questions = asked(drv, qtbot)
    stream_id = drv.pane.running_stream
    assert stream_id is not None
    drv.button("stopButton").click()
    assert drv.wait_finished(timeout_ms=20_000).status == "cancelled"
    qtbot.waitUntil(lambda: not questions.cards, timeout=10_000)  # its askpass went away
    assert processes_of(stream_id) == [], "ssh and its askpass are gone"
    assert drv.app.askpass.desk.open_ids() == []
