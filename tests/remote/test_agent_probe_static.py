"""The agent probe runs on the host's own Python, like the supervisor (stdlib only, Python >= 3.8:
test_host_programs_static.py), and the loader that runs it is a constant. No sshd needed."""

from __future__ import annotations

import os
from pathlib import Path

from tolaria.core.remote import agent_probe, discover

SOURCE = Path(agent_probe.__file__)


def test_the_shipped_source_is_what_is_sent() -> None:
    assert discover.probe_source() == SOURCE.read_bytes()
    assert "{" not in discover.LOADER.replace("{}", ""), "a constant: nothing is formatted in"


def login_shell(folder: Path, adds: Path) -> Path:
    """A login shell whose profile puts ``adds`` on PATH and prints a banner (the account's
    own profile is left alone: other tests use the account too)."""
    shell = folder / "login-sh"
    shell.write_text(f'#!/bin/sh\nshift\necho "Welcome"\nPATH="{adds}:$PATH" exec /bin/sh -c "$@"\n')
    shell.chmod(0o755)
    return shell


def test_names_never_reach_the_shell_script() -> None:
    """A program name with shell syntax is an argument of the login shell, never its script."""
    hostile = "x; touch /tmp/tolaria-probe-pwned #"
    found = agent_probe.login_shell_paths([hostile], {"PATH": "/usr/bin:/bin",
                                                      "SHELL": "/bin/sh"}, 5.0)
    assert found == {}
    assert not Path("/tmp/tolaria-probe-pwned").exists()


def test_the_probe_finds_programs_as_the_supervisor_does(tmp_path: Path) -> None:
    """The probe's resolver and the supervisor's (``_resolve``, what a run there uses) agree:
    on PATH, only through the login shell, by path, and not at all."""
    from tolaria.core.remote.supervisor import plumbing

    on_path, in_login = tmp_path / "bin", tmp_path / "login"
    for folder, name in ((on_path, "agent-a"), (in_login, "agent-b")):
        folder.mkdir()
        (folder / name).write_text("#!/bin/sh\necho 1.0\n")
        (folder / name).chmod(0o755)
    env = {"PATH": f"{on_path}:/usr/bin:/bin", "SHELL": str(login_shell(tmp_path, in_login))}
    names = ["agent-a", "agent-b", str(on_path / "agent-a"), "agent-none"]
    answer = agent_probe.probe({"env": env, "timeout": 5, "agents": [
        {"id": name, "program": name, "version": [name], "same": True} for name in names]})
    probed = {a["id"]: a["path"] for a in answer["agents"]}
    base = {**os.environ, **env}
    assert probed == {name: plumbing._resolve(name, dict(base)) for name in names}
    assert probed["agent-b"] == str(in_login / "agent-b")
    assert [a["version"] for a in answer["agents"]][:3] == ["1.0"] * 3
