"""Writing ``[hosts."NAME"]`` (Preferences → Hosts): checked by the parsers a run uses, each
problem on its field, written atomically with the rest of the file kept, and read back by
``load_target`` as written; bad input writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tolaria.config.remote_hosts import load_target
from tolaria.config.remote_hosts_edit import (
    HostConfigError,
    HostEntry,
    host_problems,
    read_hosts,
    remove_host,
    save_host,
)
from tolaria.support.tomlfile import SettingsFileError

HAND = ('# my settings\n[appearance]\ntheme = "dark"  # keep\n\n'
        '[hosts."devbox"]\npython = "/usr/bin/python3.12"  # the new one\n')


def test_a_host_round_trips_and_the_rest_of_the_file_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(HAND)
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n")
    entry = HostEntry("me@box.example", ssh_command="ssh -4",
                      ssh_config=str(config), disconnect_seconds="5",
                      env=(("PATH", "/opt/node/bin:/usr/bin"), ("API_TOKEN", "s3cret")),
                      programs=(("claude", "/home/me/.local/bin/claude"),))
    save_host(entry, path=path)
    save_host(HostEntry("box", command="docker exec -i box", python="python3.11"), path=path)
    text = path.read_text()
    assert text.startswith(HAND), "hand edits and comments kept"
    hosts = read_hosts(path)
    assert list(hosts) == ["devbox", "me@box.example", "box"]
    assert hosts["me@box.example"] == entry
    target = load_target("me@box.example", path)
    assert target.ssh is not None and target.ssh.user == "me"
    assert target.ssh_command == "ssh -4" and target.heartbeat_s == 5.0
    assert dict(target.env) == {"PATH": "/opt/node/bin:/usr/bin", "API_TOKEN": "s3cret"}
    assert dict(target.programs) == {"claude": "/home/me/.local/bin/claude"}
    box = load_target("box", path)
    assert box.prefix == ("docker", "exec", "-i", "box") and box.python == "python3.11"

    # Renamed and changed: the old table goes, the untouched key keeps its comment.
    save_host(HostEntry("devbox2", python="/usr/bin/python3.12"), replace="devbox", path=path)
    assert "devbox2" in read_hosts(path) and "devbox" not in read_hosts(path)
    assert remove_host("devbox2", path=path) and remove_host("box", path=path)
    assert remove_host("me@box.example", path=path)
    assert not remove_host("me@box.example", path=path)
    assert "[hosts" not in path.read_text()
    assert path.read_text().startswith('# my settings\n[appearance]\ntheme = "dark"  # keep\n')


@pytest.mark.parametrize(("entry", "field", "says"), [
    (HostEntry(""), "name", "give the host's destination"),
    (HostEntry("-oProxyCommand=x"), "name", "starts with '-'"),
    (HostEntry("ssh://box:99999"), "name", "not a port number"),
    (HostEntry("dev box"), "name", "spaces"),
    (HostEntry("box", command="docker exec 'box"), "command", "cannot be split"),
    (HostEntry("box", ssh_config="/no/such/ssh_config"), "ssh_config", "no such file"),
    (HostEntry("box", disconnect_seconds="0.1"), "disconnect_seconds", "from 0.5 to 3600"),
    (HostEntry("box", disconnect_seconds="soon"), "disconnect_seconds", "from 0.5 to 3600"),
    (HostEntry("box", python="python3\nrm"), "python", "one line"),
    (HostEntry("box", env=(("1BAD", "x"),)), "env", "not an environment variable name"),
    (HostEntry("box", env=(("A", "1"), ("A", "2"))), "env", "listed twice"),
    (HostEntry("box", programs=(("Claude Code", "/x"),)), "programs", "not an agent id"),
    (HostEntry("box", programs=(("claude", " "),)), "programs", "give the program's path"),
])
def test_bad_input_is_said_on_its_field_and_nothing_is_written(
        tmp_path: Path, entry: HostEntry, field: str, says: str) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(HAND)
    problems = host_problems(entry)
    assert [f for f, _ in problems] == [field], problems
    assert says in problems[0][1]
    with pytest.raises(HostConfigError) as caught:
        save_host(entry, path=path)
    assert caught.value.problems == problems
    assert path.read_text() == HAND


def test_a_taken_name_and_a_broken_file_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(HAND)
    with pytest.raises(HostConfigError, match="already set up"):
        save_host(HostEntry("devbox"), path=path)
    assert path.read_text() == HAND
    broken = HAND + "[oops\n"
    path.write_text(broken)
    with pytest.raises(SettingsFileError):
        save_host(HostEntry("other"), path=path)
    assert path.read_text() == broken
