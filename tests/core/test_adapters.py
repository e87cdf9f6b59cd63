from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tolaria.core.adapters import (
    ManifestError,
    builtin_adapters_dir,
    load_adapters,
    load_manifest_file,
    substitute,
)

GOOD = """
id = "my-agent"
name = "My agent"
protocol = "lines"
command = ["my-agent", "--cwd", "{cwd}", "{prompt}"]
[env]
MY_AGENT_MODE = "fast"
[stop]
polite = "sigint"
polite_window_ms = 200
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_builtin_manifests_load_without_errors() -> None:
    adapters = load_adapters(user_dir=Path("/nonexistent"))
    assert adapters.errors == []
    assert {"demo", "claude"} <= set(adapters.manifests)
    demo = adapters.get("demo")
    assert demo.builtin and demo.protocol == "claude-stream-json"
    assert builtin_adapters_dir().is_dir()


def test_user_manifest_loads_and_overrides_builtin(tolaria_home: Path) -> None:
    write(tolaria_home / "adapters", "mine.toml", GOOD)
    write(tolaria_home / "adapters", "demo.toml",
          'id = "demo"\nname = "My demo"\nprotocol = "lines"\ncommand = ["echo"]\n')
    adapters = load_adapters()
    mine = adapters.get("my-agent")
    assert mine.env == {"MY_AGENT_MODE": "fast"}
    assert mine.stop.polite == "sigint" and mine.stop.polite_window_ms == 200
    assert not mine.builtin
    assert adapters.get("demo").name == "My demo"


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ('id = "Bad Id"\nprotocol = "lines"\ncommand = ["x"]', "id", "a-z, 0-9"),
        ('id = "x"\nprotocol = "telnet"\ncommand = ["x"]', "protocol", "must be one of"),
        ('id = "x"\nprotocol = "lines"\ncommand = "x --flag"', "command", "list of strings"),
        ('id = "x"\nprotocol = "lines"\ncommand = []', "command", "non-empty"),
        ('id = "x"\nprotocol = "lines"\ncommand = ["x", 3]', "command[1]", "must be a string"),
        ('id = "x"\nprotocol = "lines"\ncommand = ["{prompt}"]', "command[0]", "cannot be the prompt"),
        ('id = "x"\nprotocol = "lines"\ncommand = ["x"]\nshell = true', "shell", "unknown key"),
        ('id = "x"\nprotocol = "lines"\ncommand = ["x"]\n[env]\n"A B" = "1"', "env.A B", "not a valid"),
        ('id = "x"\nprotocol = "lines"\ncommand = ["x"]\n[env]\nA = 1', "env.A", "must be a string"),
        ('id = "x"\nprotocol = "lines"\ncommand = ["x"]\n[stop]\npolite = "kill"', "stop.polite", "one of"),
        ('id = "x"\nprotocol = "lines"\ncommand = ["x"]\n[stop]\npolite_window_ms = -1',
         "stop.polite_window_ms", "milliseconds"),
    ],
)
def test_broken_manifest_names_file_key_and_reason(tmp_path: Path, text: str, key: str,
                                                   reason: str) -> None:
    path = write(tmp_path, "broken.toml", text)
    with pytest.raises(ManifestError) as info:
        load_manifest_file(path)
    err = info.value
    assert err.path == path and err.key == key and reason in err.reason
    assert str(path) in str(err) and key in str(err)


def test_invalid_toml_and_binary_are_reported(tmp_path: Path) -> None:
    bad_toml = write(tmp_path, "a.toml", "id = \n")
    with pytest.raises(ManifestError, match="invalid TOML"):
        load_manifest_file(bad_toml)
    binary = tmp_path / "b.toml"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ManifestError, match="not UTF-8"):
        load_manifest_file(binary)


def test_broken_manifest_does_not_stop_the_others(tolaria_home: Path) -> None:
    write(tolaria_home / "adapters", "good.toml", GOOD)
    write(tolaria_home / "adapters", "bad.toml", 'id = "bad"\nprotocol = "nope"\ncommand = ["x"]')
    adapters = load_adapters()
    assert "my-agent" in adapters.manifests and "demo" in adapters.manifests
    assert len(adapters.errors) == 1 and adapters.errors[0].key == "protocol"
    with pytest.raises(KeyError, match="broken manifest"):
        adapters.get("bad")
    with pytest.raises(KeyError, match="unknown agent 'nope'"):
        adapters.get("nope")


def test_substitute_keeps_prompt_as_one_argument() -> None:
    prompt = "$(touch pwned); rm -rf ~ 'quoted' \"double\"\nnext line"
    argv = substitute(("agent", "-p", "{prompt}", "--dir={cwd}", "{python}"), prompt=prompt, cwd="/w d")
    assert argv == ["agent", "-p", prompt, "--dir=/w d", sys.executable]


def test_substitute_is_single_pass() -> None:
    argv = substitute(("a", "--p={prompt}"), prompt="{cwd} and {python}", cwd="/x")
    assert argv == ["a", "--p={cwd} and {python}"]


def test_resume_must_name_the_session(tmp_path: Path) -> None:
    base = 'id = "x"\nprotocol = "lines"\ncommand = ["x", "{prompt}"]\n'
    ok = load_manifest_file(write(tmp_path, "ok.toml", base + 'resume = ["--resume", "{session_id}"]'))
    assert ok.resume == ("--resume", "{session_id}")
    assert substitute(ok.resume, session_id="abc") == ["--resume", "abc"]
    with pytest.raises(ManifestError, match="session_id"):
        load_manifest_file(write(tmp_path, "bad.toml", base + 'resume = ["--resume"]'))
