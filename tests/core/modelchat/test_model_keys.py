"""API keys from the environment or the system keyring, the ``/models`` list, and the
``tolaria key`` / ``tolaria models`` commands, against the loopback fake OpenAI server.

The keyring is a real ``keyring`` backend (tests/fakes/file_keyring.py, a JSON file), or the
package's own ``null`` (finds nothing) and ``fail`` (no backend, as on headless Linux) backends.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from fakes.fake_openai_server import FakeOpenAIServer, text_reply, tool_reply
from fakes.file_keyring import FileKeyring
from helpers import async_test, start_run
from keyring.backends import fail, null

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.modelchat.history import ChatHistoryStore, SavedChat
from tolaria.core.modelchat.keys import (
    KeyStoreError,
    delete_key,
    keyring_key,
    missing_key_message,
    resolve_api_key,
    set_key,
)
from tolaria.core.modelchat.models_list import ModelListError, list_models
from tolaria.core.store.db import Store
from tolaria.support import paths

ROOT = Path(__file__).resolve().parents[3]
FAKES = ROOT / "tests" / "fakes"
SECRET = "sk-keyring-0123456789-very-secret"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def test_keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FileKeyring]:
    """Every test here gets its own file keyring (never the developer's real one)."""
    monkeypatch.delenv("FAKE_CHAT_KEY", raising=False)
    previous = keyring.get_keyring()
    backend = FileKeyring(tmp_path / "keyring.json")
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


def chat_manifest(base_url: str, **extra: object) -> Manifest:
    return Manifest(id="fake-chat", name="Fake chat (local model)", protocol="openai-chat",
                    command=(), base_url=base_url, model="fake-model",
                    api_key_env="FAKE_CHAT_KEY", **extra)  # type: ignore[arg-type]


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


# --- where the key comes from -----------------------------------------------------------------


def test_env_wins_then_keyring_then_nothing(test_keyring: FileKeyring) -> None:
    manifest = chat_manifest("http://127.0.0.1:1/v1")
    assert resolve_api_key(manifest, {}) is None
    set_key("fake-chat", SECRET)
    assert test_keyring.get_password("tolaria", "fake-chat") == SECRET
    assert resolve_api_key(manifest, {}) == SECRET
    assert resolve_api_key(manifest, {"FAKE_CHAT_KEY": "from-env"}) == "from-env"
    assert resolve_api_key(manifest, {"FAKE_CHAT_KEY": ""}) == SECRET
    # A manifest that names no variable needs no key: the keyring is not even asked.
    local = Manifest(id="fake-chat", name="x", protocol="openai-chat", command=(),
                     base_url="http://x/v1", model="m")
    assert resolve_api_key(local, {}) is None
    assert delete_key("fake-chat") is True
    assert delete_key("fake-chat") is False
    assert keyring_key("fake-chat") is None


def test_no_keyring_backend_falls_back_cleanly() -> None:
    keyring.set_keyring(fail.Keyring())
    manifest = chat_manifest("http://127.0.0.1:1/v1")
    assert resolve_api_key(manifest, {}) is None
    assert resolve_api_key(manifest, {"FAKE_CHAT_KEY": "k"}) == "k"
    with pytest.raises(KeyStoreError, match="no system keyring is available"):
        set_key("fake-chat", SECRET)
    with pytest.raises(KeyStoreError, match="no system keyring is available"):
        delete_key("fake-chat")
    keyring.set_keyring(null.Keyring())
    assert resolve_api_key(manifest, {}) is None
    assert missing_key_message(manifest) == (
        "Fake chat (local model): no API key: set $FAKE_CHAT_KEY or store it in the system "
        "keyring with `tolaria key set fake-chat`")


@async_test
async def test_keyring_key_reaches_the_server_and_nowhere_else(
        server: FakeOpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    set_key("fake-chat", SECRET)
    server.script(tool_reply(("c1", "run_command", {"command": "env"})), text_reply("done"))
    run = start_run(chat_manifest(server.base_url), "show env", cwd=tmp_path)
    done = await run.finish()
    assert done.stop_reason == "end_turn"
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {SECRET}"] * 2
    assert SECRET not in repr(server.requests[1].body)  # not in the command's environment
    saved = list((paths.data_dir() / "model-chats").glob("*.json"))
    assert len(saved) == 1
    assert SECRET not in saved[0].read_text() and "done" in saved[0].read_text()
    assert oct(saved[0].stat().st_mode & 0o777) == "0o600"
    tool_output = run.collector.of("tool_done")[0].output  # type: ignore[attr-defined]
    assert SECRET not in tool_output and "FAKE_CHAT_KEY" not in tool_output
    for record in caplog.records:
        assert SECRET not in record.getMessage()
    assert SECRET not in repr(run.collector.events)
    # What the window's store keeps: the events of the turn, in its SQLite file.
    store = Store()
    conversation = store.create_conversation("key test", "fake-chat", str(tmp_path))
    turn = store.start_turn(conversation.id, run.stream_id, "fake-chat", "show env")
    for event in run.collector.events:
        store.append_event(event)
    store.close()
    reopened = Store()
    kept = reopened.events(turn.id)
    assert len(kept) >= 4 and SECRET not in repr(kept)  # init, tools, text...: all stored
    reopened.close()
    for db in paths.data_dir().glob("tolaria.sqlite3*"):
        assert SECRET.encode() not in db.read_bytes()


def test_saved_history_redacts_the_key_wherever_it_appears(tmp_path: Path) -> None:
    """Defence in depth: even text that quotes the key (a user pasting it) is saved redacted."""
    store = ChatHistoryStore(tmp_path)
    store.save("s1", SavedChat([{"role": "user", "content": f"my key is {SECRET}"}]),
               redact=SECRET)
    raw = (tmp_path / "s1.json").read_text()
    assert SECRET not in raw and "my key is ***" in raw


@async_test
async def test_missing_key_without_a_keyring_says_what_to_do(tmp_path: Path) -> None:
    keyring.set_keyring(fail.Keyring())
    run = start_run(chat_manifest(closed_port_url()), "hi", cwd=tmp_path)
    done = await run.finish()
    assert done.stop_reason == "error"
    message = run.collector.of("error")[0].message  # type: ignore[attr-defined]
    assert "no API key: set $FAKE_CHAT_KEY or store it in the system keyring with " \
           "`tolaria key set fake-chat`" in message


# --- /models ----------------------------------------------------------------------------------


def test_list_models(server: FakeOpenAIServer) -> None:
    server.models = ["qwen3:8b", "llama3.1:8b", "qwen3:8b"]
    assert list_models(chat_manifest(server.base_url), 5, env={"FAKE_CHAT_KEY": SECRET}) == [
        "llama3.1:8b", "qwen3:8b"]
    assert server.model_requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert server.requests == []


def test_list_models_errors(server: FakeOpenAIServer) -> None:
    url = closed_port_url()
    with pytest.raises(ModelListError) as err:
        list_models(chat_manifest(url), 5)
    assert str(err.value) == f"cannot reach {url}: connection refused — is Fake chat running?"

    manifest = chat_manifest(server.base_url)
    server.models_status = 401
    with pytest.raises(ModelListError, match=r"HTTP 401: no API key was sent: set "
                                             r"\$FAKE_CHAT_KEY or run `tolaria key set"):
        list_models(manifest, 5, env={})
    with pytest.raises(ModelListError, match="HTTP 401: the API key was refused") as err:
        list_models(manifest, 5, api_key=SECRET)
    assert SECRET not in str(err.value)

    server.models_status = 404
    with pytest.raises(ModelListError, match="does not offer a model list"):
        list_models(manifest, 5, api_key="k")

    server.models_status, server.models_raw = 200, b"<html>LM Studio</html>"
    with pytest.raises(ModelListError, match=r"did not answer JSON \(text/html\).*"
                                             r"OpenAI-compatible"):
        list_models(manifest, 5, api_key="k")

    server.models_raw = b'{"models": []}'
    with pytest.raises(ModelListError, match='without a "data" list'):
        list_models(manifest, 5, api_key="k")

    cli = Manifest(id="demo", name="Demo", protocol="lines", command=("x",))
    with pytest.raises(ModelListError, match="not a model endpoint"):
        list_models(cli, 5)


# --- the commands, as real subprocesses -------------------------------------------------------


def cli_env(home: Path, keyring_file: Path, backend: str = "file_keyring.FileKeyring"
            ) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TOLARIA_STREAM_ID", "FAKE_CHAT_KEY")}
    env["TOLARIA_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(FAKES)])
    env["PYTHON_KEYRING_BACKEND"] = backend
    env["TOLARIA_TEST_KEYRING"] = str(keyring_file)
    return env


def tolaria(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tolaria", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)


def write_user_manifest(home: Path, base_url: str) -> None:
    folder = home / "adapters"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fake-chat.toml").write_text(
        'id = "fake-chat"\nname = "Fake chat (local model)"\nprotocol = "openai-chat"\n'
        f'base_url = "{base_url}"\nmodel = "fake-model"\napi_key_env = "FAKE_CHAT_KEY"\n')


def test_key_set_models_delete_commands(server: FakeOpenAIServer, tolaria_home: Path,
                                        tmp_path: Path) -> None:
    write_user_manifest(tolaria_home, server.base_url)
    keyring_file = tmp_path / "cli-keyring.json"
    env = cli_env(tolaria_home, keyring_file)
    stored = tolaria("key", "set", "fake-chat", env=env, stdin=SECRET + "\n")
    assert stored.returncode == 0, stored.stderr
    assert SECRET not in stored.stdout + stored.stderr
    assert json.loads(keyring_file.read_text()) == {"tolaria/fake-chat": SECRET}

    server.models = ["fake-model", "other-model"]
    listed = tolaria("models", "fake-chat", env=env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == ["fake-model  (default)", "other-model"]
    assert server.model_requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    as_json = json.loads(tolaria("models", "fake-chat", "--json", env=env).stdout)
    assert as_json == {"agent": "fake-chat", "default": "fake-model",
                       "models": ["fake-model", "other-model"]}

    deleted = tolaria("key", "delete", "fake-chat", env=env)
    assert deleted.returncode == 0 and "deleted" in deleted.stdout
    assert json.loads(keyring_file.read_text()) == {}
    again = tolaria("key", "delete", "fake-chat", env=env)
    assert again.returncode == 0 and "no key stored" in again.stdout

    server.models_status = 401
    refused = tolaria("models", "fake-chat", env=env)
    assert refused.returncode == 1 and "no API key was sent" in refused.stderr


def test_key_and_models_commands_bad_input(tolaria_home: Path, tmp_path: Path) -> None:
    write_user_manifest(tolaria_home, closed_port_url())
    env = cli_env(tolaria_home, tmp_path / "k.json")
    empty = tolaria("key", "set", "fake-chat", env=env, stdin="")
    assert empty.returncode == 2 and "no key given" in empty.stderr
    unknown = tolaria("key", "set", "nope", env=env, stdin="x\n")
    assert unknown.returncode == 2 and "unknown agent 'nope'" in unknown.stderr
    no_key = tolaria("key", "set", "ollama", env=env, stdin="x\n")
    assert no_key.returncode == 2 and "has no api_key_env" in no_key.stderr
    cli_agent = tolaria("models", "demo", env=env)
    assert cli_agent.returncode == 2 and "not a model endpoint" in cli_agent.stderr
    down = tolaria("models", "fake-chat", env=env)
    assert down.returncode == 1
    assert "connection refused — is Fake chat running?" in down.stderr
    # The key is never taken from the command line.
    argv_key = tolaria("key", "set", "fake-chat", SECRET, env=env)
    assert argv_key.returncode == 2 and not (tmp_path / "k.json").exists()
    headless = cli_env(tolaria_home, tmp_path / "k.json", backend="keyring.backends.fail.Keyring")
    failed = tolaria("key", "set", "fake-chat", env=headless, stdin="x\n")
    assert failed.returncode == 1
    assert "no system keyring is available" in failed.stderr and "$FAKE_CHAT_KEY" in failed.stderr
