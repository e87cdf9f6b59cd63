"""Destinations as ``tolaria run --host`` and the window take them, and the ssh argv they give."""

from __future__ import annotations

import pytest

from tolaria.core.remote.hosts import BadDestination, SshHost, Target, parse_destination, parse_host


@pytest.mark.parametrize(("text", "host"), [
    ("devbox", SshHost("devbox")),
    ("me@devbox", SshHost("devbox", "me")),
    ("me@10.0.0.2", SshHost("10.0.0.2", "me")),
    ("ssh://me@devbox:2222", SshHost("devbox", "me", 2222)),
    ("ssh://devbox", SshHost("devbox")),
    ("ssh://me@[::1]:22", SshHost("::1", "me", 22)),
    ("ssh://devbox:22/", SshHost("devbox", None, 22)),
])
def test_hosts_parse(text: str, host: SshHost) -> None:
    assert parse_host(text) == host


@pytest.mark.parametrize(("text", "reason"), [
    ("", "empty"),
    ("-oProxyCommand=evil", "starts with '-'"),
    ("dev box", "spaces"),
    ("ssh://devbox:99999", "not a port number"),
    ("ssh://devbox:abc", "not a port number"),
    ("http://devbox", "only ssh://"),
    ("ssh://devbox/home/me", "has a path"),
    ("me;rm@devbox", "user name"),
    ("dev$box", "host name"),
])
def test_bad_hosts_say_why(text: str, reason: str) -> None:
    with pytest.raises(BadDestination, match=reason.replace("(", r"\(")):
        parse_host(text)


def test_ssh_argv_never_lets_the_host_be_an_option() -> None:
    target = parse_destination("ssh://me@devbox:2222", ssh_config="/cfg")
    argv = target.argv(["python3", "-c", "print('x y')"])
    assert argv[:3] == ["ssh", "-F", "/cfg"]
    assert "BatchMode=yes" in argv
    assert "ServerAliveInterval=5" in argv and any(a.startswith("ConnectTimeout=") for a in argv)
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-l") + 1] == "me"
    assert argv[-3:] == ["--", "devbox", "python3 -c 'print('\"'\"'x y'\"'\"')'"]
    assert "StrictHostKeyChecking=no" not in " ".join(argv)


def test_a_window_that_can_answer_lets_ssh_ask() -> None:
    target = Target(ssh=SshHost("devbox"), interactive=True, ssh_command="/opt/ssh -4")
    argv = target.argv(["true"])
    assert argv[:2] == ["/opt/ssh", "-4"]
    assert "BatchMode=yes" not in argv


def test_a_command_target_is_a_prefix() -> None:
    target = parse_destination("exec:docker exec -i 'my box'")
    assert target.ssh is None
    assert target.argv(["python3", "-c", "x"]) == ["docker", "exec", "-i", "my box", "python3",
                                                   "-c", "x"]
    assert target.label == "exec:docker exec -i 'my box'"
    with pytest.raises(BadDestination, match="empty"):
        parse_destination("exec:  ")
    with pytest.raises(BadDestination, match="cannot be split"):
        parse_destination("exec:docker 'unclosed")
