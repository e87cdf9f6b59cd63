"""Hostile input: manifests cannot turn a shell on, other users cannot use the control socket,
API keys never reach ``tolaria agents`` / ``tolaria run`` output, crash reports or the stored
turn. See docs/RELIABILITY.md.

Covered elsewhere (referenced there): the hostile prompt reaching the agent as one verbatim
argument (tests/core/process/test_zoo.py::test_env_marker_and_hostile_prompt_is_one_verbatim_argument)
and the control socket refusing non-id requests
(tests/cli/test_cli.py::test_control_socket_is_private_and_refuses_junk).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import async_test, start_run

from tolaria.core.adapters.manifest import ManifestError, parse_manifest
from tolaria.core.process import control
from tolaria.core.process.control import ControlServer
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import STATUS_INTERRUPTED, Store

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "$(touch pwned); rm -rf ~"
SECRET = "sk-test-SECRET-d41d8cd98f00b204e9800998ecf8427e"
NOBODY = 65534


# --- a manifest cannot run a shell unless its command names one ---------------------------


@pytest.mark.parametrize("command", ["sh -c 'touch pwned'", HOSTILE, "", [], [""], [1, 2]])
def test_a_command_must_be_an_argv_list(command: object) -> None:
    with pytest.raises(ManifestError) as err:
        parse_manifest({"id": "evil", "protocol": "lines", "command": command})
    assert err.value.key is not None and err.value.key.startswith("command")


@pytest.mark.parametrize("key", ["shell", "use_shell", "preexec"])
def test_no_key_turns_a_shell_on(key: str) -> None:
    with pytest.raises(ManifestError, match="unknown key") as err:
        parse_manifest({"id": "evil", "protocol": "lines", "command": ["echo", "{prompt}"],
                        key: True})
    assert err.value.key == key


@async_test
async def test_shell_syntax_in_a_manifest_command_is_inert(tmp_path: Path) -> None:
    """Every command element is one argument to ``execve``: no shell ever reads it."""
    manifest = parse_manifest({"id": "echoer", "protocol": "lines",
                               "command": ["echo", "$(touch pwned)", "`touch pwned2`;",
                                           "{prompt}", "> pwned3"]})
    work = tmp_path / "work"
    work.mkdir()
    run = start_run(manifest, HOSTILE, cwd=work)
    done = await run.finish()
    assert done.stop_reason == "end_turn"
    assert run.collector.text() == f"$(touch pwned) `touch pwned2`; {HOSTILE} > pwned3\n"
    assert list(work.iterdir()) == []


# --- the control socket refuses other users ----------------------------------------------


def _ask_as(uid: int, path: Path, request: bytes) -> str:
    """Fork; the child drops to ``uid`` and asks the socket; return what it got (or its error).

    A fork and not a new interpreter: the interpreter lives under /root (mode 0700), which
    ``nobody`` cannot execute.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: no Python-level cleanup, just the socket calls, then _exit
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(10)
                sock.connect(str(path))
                sock.sendall(request)
                answer = sock.recv(65536).decode(errors="replace")
            os.write(write_fd, answer.encode())
        except BaseException as exc:
            os.write(write_fd, f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


@contextlib.contextmanager
def _open_folder() -> Iterator[Path]:
    """A folder another user can reach (the test's tmp_path lies under a 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="tolaria-peer-", dir="/tmp"))
    try:
        yield folder
    finally:
        for child in folder.iterdir():
            child.unlink()
        folder.rmdir()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to become another user (nobody)")
@async_test
async def test_another_user_is_refused_even_when_the_file_modes_let_them_in() -> None:
    with _open_folder() as folder:
        server = ControlServer(ProcessRegistry(), folder=folder)
        await server.start()
        try:
            loop = asyncio.get_running_loop()
            # As shipped (socket 0600): the kernel refuses the connection outright.
            as_shipped = await loop.run_in_executor(None, _ask_as, NOBODY, server.path,
                                                    b'{"op": "list"}\n')
            assert as_shipped.startswith("PermissionError"), as_shipped
            # Open every door the file system has: the peer-credential check still refuses.
            os.chmod(folder, 0o777)
            os.chmod(server.path, 0o666)
            opened = await loop.run_in_executor(None, _ask_as, NOBODY, server.path,
                                                b'{"op": "list"}\n')
            assert json.loads(opened) == {"ok": False, "error": "refused: another user"}
            # The same request from our own uid is answered.
            mine = await loop.run_in_executor(None, _ask_as, os.getuid(), server.path,
                                              b'{"op": "list"}\n')
            assert json.loads(mine)["ok"] is True
        finally:
            await server.close()


@async_test
async def test_peer_uid_check_refuses_a_foreign_uid(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root: the same refusal, with the peer's uid (read by SO_PEERCRED) made foreign."""
    server = ControlServer(ProcessRegistry(), folder=tmp_path)
    await server.start()
    try:
        a, b = socket.socketpair(socket.AF_UNIX)
        assert control._peer_uid(a) == os.getuid()
        a.close()
        b.close()
        monkeypatch.setattr(control, "_peer_uid", lambda sock: os.getuid() + 1)
        reader, writer = await asyncio.open_unix_connection(str(server.path))
        writer.write(b'{"op": "list"}\n')
        answer = json.loads(await reader.readline())
        writer.close()
        assert answer == {"ok": False, "error": "refused: another user"}
    finally:
        await server.close()


# --- API keys never appear in Tolaria's output -------------------------------------------


class _KeyEchoingServer(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint at its worst: it echoes the Authorization header."""

    def do_POST(self) -> None:
        body = json.dumps({"error": {"message": f"invalid key: {self.headers.get('Authorization')}"}})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


def _cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    full.update(TOLARIA_HOME=str(home), PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "tolaria", *args], env=full, cwd=home,
                          capture_output=True, text=True, timeout=60, check=False)


def test_api_keys_stay_out_of_agents_and_run_output(tolaria_home: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeyEchoingServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        adapters = tolaria_home / "adapters"
        adapters.mkdir()
        (adapters / "leaky-chat.toml").write_text(
            'id = "leaky-chat"\nprotocol = "openai-chat"\n'
            f'base_url = "http://127.0.0.1:{server.server_port}/v1"\nmodel = "m"\n'
            'api_key_env = "LEAKY_KEY"\n')
        (adapters / "leaky-cli.toml").write_text(
            'id = "leaky-cli"\nprotocol = "lines"\n'
            f'command = [{json.dumps(sys.executable)}, "-c", "print(\'hello\')", "{{prompt}}"]\n'
            f'version_command = [{json.dumps(sys.executable)}, "--version"]\n'
            f'[env]\nLEAKY_TOKEN = "{SECRET}"\n')
        outputs = [
            _cli(tolaria_home, "agents", "--json", LEAKY_KEY=SECRET),
            _cli(tolaria_home, "agents", LEAKY_KEY=SECRET),
            _cli(tolaria_home, "run", "--json", "--agent", "leaky-chat", "hi", LEAKY_KEY=SECRET),
            _cli(tolaria_home, "run", "--agent", "leaky-chat", "hi", LEAKY_KEY=SECRET),
            _cli(tolaria_home, "run", "--json", "--agent", "leaky-cli", "hi", LEAKY_KEY=SECRET),
        ]
    finally:
        server.shutdown()
        server.server_close()
    agents = json.loads(outputs[0].stdout)["agents"]
    assert {"leaky-chat", "leaky-cli"} <= {a["agent"] for a in agents}, outputs[0].stderr
    chat = [json.loads(line) for line in outputs[2].stdout.splitlines()]
    assert chat[-1]["kind"] == "done" and chat[-1]["stop_reason"] == "error"
    # The endpoint's echo came back, redacted.
    assert any("invalid key: Bearer ***" in e.get("message", "") for e in chat), chat
    assert outputs[4].returncode == 0, outputs[4].stderr
    for result in outputs:
        assert SECRET not in result.stdout + result.stderr


#: ``tolaria run`` with a bug in its run path: the exception's message holds the whole manifest
#: (its ``[env]`` with the secrets) and the key from the environment.
_BUGGY_RUN = """\
import os, sys
from tolaria.cli import main as cli, run_cmd

async def broken(request, stream_id, *_rest, **_options):
    raise RuntimeError(f"bug: {request.manifest!r} {os.environ['LEAKY_KEY']}")

run_cmd.run_with_control = broken
sys.exit(cli.main(["run", "--agent", "leaky-cli", "hi"]))
"""


def test_api_keys_stay_out_of_crash_reports_and_the_stored_turn(tolaria_home: Path) -> None:
    plain = "plain-password-without-pattern"  # no sk-/Bearer shape: only its name says secret
    adapters = tolaria_home / "adapters"
    adapters.mkdir()
    (adapters / "leaky-cli.toml").write_text(
        'id = "leaky-cli"\nprotocol = "lines"\n'
        f'command = [{json.dumps(sys.executable)}, "-c", "print(\'hello\')", "{{prompt}}"]\n'
        f'[env]\nLEAKY_TOKEN = "{SECRET}"\nLEAKY_PASSWORD = "{plain}"\n')
    full = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    full.update(TOLARIA_HOME=str(tolaria_home), PYTHONPATH=str(ROOT), LEAKY_KEY=SECRET)
    crashed = subprocess.run([sys.executable, "-c", _BUGGY_RUN], env=full, cwd=tolaria_home,
                             capture_output=True, text=True, timeout=60, check=False)
    assert crashed.returncode == 1
    [report] = (tolaria_home / "data" / "crash-reports").glob("crash-*.txt")
    text = report.read_text()
    assert "RuntimeError: bug: Manifest(" in text and "LEAKY_PASSWORD': '***'" in text
    store_file = tolaria_home / "data" / "tolaria.sqlite3"
    for output in (text, crashed.stdout, crashed.stderr, store_file.read_bytes().decode("latin-1")):
        assert SECRET not in output and plain not in output
    store = Store(store_file)
    try:
        [chat] = store.list_conversations()
        [turn] = store.turns(chat.id)
        assert turn.status == STATUS_INTERRUPTED  # the run never ended: marked on the way out
    finally:
        store.close()
