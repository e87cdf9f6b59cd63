"""``[remote]`` and ``[hosts."NAME"]`` in settings.toml: what ``tolaria run --host`` applies."""

from __future__ import annotations

from pathlib import Path

import pytest

from tolaria.config.remote_hosts import load_target
from tolaria.core.remote.hosts import BadDestination, SshHost


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    return path


def test_no_settings_is_plain_ssh(tmp_path: Path) -> None:
    target = load_target("me@devbox", tmp_path / "missing.toml")
    assert target.ssh == SshHost("devbox", "me")
    assert (target.python, target.ssh_command, target.heartbeat_s) == ("python3", "ssh", 3.0)


def test_remote_then_host_then_command_line(tmp_path: Path) -> None:
    path = _write(tmp_path, '[remote]\npython = "python3.9"\nssh_config = "~/cfg"\n'
                  'disconnect_seconds = 4\n'
                  '[hosts."devbox"]\npython = "/opt/py/bin/python3"\n'
                  'env = { PATH = "/opt/node/bin:/usr/bin" }\nprograms = { claude = "/x/claude" }\n')
    target = load_target("devbox", path, ssh_config="/given")
    assert target.python == "/opt/py/bin/python3"
    assert target.ssh_config == "/given"
    assert target.heartbeat_s == 4.0
    assert target.env == {"PATH": "/opt/node/bin:/usr/bin"}
    assert target.programs == {"claude": "/x/claude"}
    other = load_target("elsewhere", path)
    assert other.python == "python3.9"
    assert other.ssh_config == str(Path("~/cfg").expanduser())


def test_a_named_command_target(tmp_path: Path) -> None:
    path = _write(tmp_path, '[hosts."box"]\ncommand = "docker exec -i box"\n')
    target = load_target("box", path)
    assert target.ssh is None
    assert target.prefix == ("docker", "exec", "-i", "box")
    assert target.label == "box"


@pytest.mark.parametrize(("text", "problem"), [
    ('[remote]\npython = 3\n', "remote.python: must be a non-empty string"),
    ('[remote]\ndisconnect_seconds = 0\n', "remote.disconnect_seconds: must be a number"),
    ('[remote]\ndisconnect_seconds = true\n', "remote.disconnect_seconds: must be a number"),
    ('[hosts."devbox"]\nenv = { A = 1 }\n', "hosts.devbox.env: must be a table of strings"),
    ('[hosts."devbox"]\npyhton = "x"\n', "hosts.devbox.pyhton: unknown setting"),
    ('[hosts."devbox"]\ncommand = ""\n', "hosts.devbox.command: must be a non-empty string"),
    ('hosts = 3\n', "must be tables"),
    ('[remote\n', "settings.toml:1: not valid TOML"),
])
def test_bad_settings_are_named(tmp_path: Path, text: str, problem: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(BadDestination) as caught:
        load_target("devbox", path)
    assert problem in str(caught.value)
