"""``@`` in a chat whose folder is on a host (issue 26.3 there, ADR 0035) over real ssh, the
local side run as the non-root user: the host's git repository lists its tracked and untracked
files but not the ignored ones; a folder that is no repository is walked with the local skip
list; names with a space and a newline survive; the stamp lets an unchanged folder answer in a
few bytes and a changed one be listed again; an unreachable host is ssh's one line, no hang.
The picker itself: tests/ui/test_remote_mention_picker.py."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from nonroot import ROOT, as_other_user, other_user_prefix, other_user_python, python_env
from remote.remotegit import as_remote, remote_home, remote_repo
from remote.sshd import ALIAS, REMOTE_USER, SshServer

from tolaria.chats.mentions.listing import HEAVY_FOLDERS

pytestmark = pytest.mark.skipif(subprocess.run(["which", "git"], capture_output=True,
                                               check=False).returncode != 0,
                                reason="git is not installed")
__all__ = ["remote_repo"]  # the fixture

LISTING = """
import json, sys, time
from tolaria.chats.mentions.hosted import HostedIndexCache, hosted_where
from tolaria.chats.mentions.listing import HEAVY_FOLDERS, WALK_LIMIT, WALK_SECONDS
from tolaria.core.remote.hostcall import HostError
from tolaria.core.remote.hostfiles import list_host_files
from tolaria.core.remote.hosts import parse_destination
alias, config, gone, *folders = sys.argv[1:]
target = parse_destination(alias, ssh_config=config)
cache = HostedIndexCache()
out = {}
for folder in folders:
    try:
        got = cache.load_from(target, hosted_where(alias, folder))
    except HostError as exc:
        out[folder] = {"error": str(exc)}
        continue
    again = list_host_files(target, folder, heavy=HEAVY_FOLDERS, limit=WALK_LIMIT,
                            seconds=WALK_SECONDS, stamp=got.stamp)
    out[folder] = {"files": list(got.listing.files), "folders": list(got.listing.folders),
                   "source": got.listing.source, "root": got.listing.root,
                   "unchanged": again.unchanged, "found": got.index.has("src/app.py")}
started = time.monotonic()
try:
    cache.load_from(parse_destination("gone", ssh_config=gone), hosted_where("gone", folders[0]))
    out["gone"] = {"error": ""}
except HostError as exc:
    out["gone"] = {"error": str(exc), "seconds": time.monotonic() - started}
print(json.dumps(out))
"""


@pytest.fixture
def plain_folder(sshd: SshServer) -> Iterator[str]:
    """A folder in the remote home that is no git repository, with heavy folders in it."""
    home = remote_home()
    folder = f"{home}/plain-{uuid.uuid4().hex[:8]}"
    as_remote("mkdir", "-p", f"{folder}/src", f"{folder}/node_modules/pkg", f"{folder}/.venv/lib",
              f"{folder}/with space", f"{folder}/build/out", cwd=home)
    for name in ("src/a.py", "node_modules/pkg/index.js", ".venv/lib/x.py", "with space/b.txt",
                 "build/out/big.bin", "odd\nname.txt", "top.md"):
        as_remote("touch", f"{folder}/{name}", cwd=home)
    yield folder
    subprocess.run(["rm", "-rf", folder], check=False)


def _unreachable(sshd: SshServer, shared: Path) -> Path:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = shared / "gone_config"
    config.write_text(f"Host gone\n  HostName 127.0.0.1\n  Port {port}\n  User {REMOTE_USER}\n"
                      f"  IdentityFile {sshd.client_key}\n  BatchMode yes\n  LogLevel ERROR\n"
                      "  ConnectTimeout 5\n")
    os.chown(config, sshd.local_uid, sshd.local_gid)
    return config


def test_a_hosted_folder_is_listed_there_like_a_local_one(
        sshd: SshServer, shared: Path, remote_repo: str, plain_folder: str) -> None:
    repo = remote_repo
    as_remote("sh", "-c", "printf '*.log\\nbuild/\\n' > .gitignore", cwd=repo)
    as_remote("mkdir", "-p", "src", "build", cwd=repo)
    for name in ("src/app.py", "new file.txt", "odd\nname.txt", "debug.log", "build/out.bin"):
        as_remote("touch", name, cwd=repo)
    home = shared / "home"
    done = as_other_user([other_user_python(), "-c", LISTING, ALIAS, str(sshd.config),
                          str(_unreachable(sshd, shared)), repo, plain_folder],
                         env=python_env(home), cwd=home, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])

    git = out[repo]
    assert git["source"] == "git" and git["root"] == repo, git
    # Tracked and untracked-not-ignored; the ignored ones (a pattern, a folder) are not.
    assert sorted(git["files"]) == sorted([".gitignore", "new file.txt", "notes.txt",
                                           "odd\nname.txt", "src/app.py"]), git
    assert git["folders"] == ["src"] and git["found"], git
    assert git["unchanged"], "the same stamp: the host answers unchanged"

    walked = out[plain_folder]
    assert walked["source"] == "walk", walked
    assert sorted(walked["files"]) == sorted(["odd\nname.txt", "top.md", "src/a.py",
                                              "with space/b.txt"]), walked
    assert walked["folders"] == ["src", "with space"], walked
    # The local skip list is the host's: every heavy folder made above is in it.
    assert {"node_modules", ".venv", "build"} <= HEAVY_FOLDERS

    gone = out["gone"]
    assert "Connection refused" in gone["error"] and "\n" not in gone["error"], gone
    assert "Traceback" not in gone["error"] and gone["seconds"] < 30, gone


CHANGED = """
import json, os, sys, time
from tolaria.chats.mentions.hosted import HostedIndexCache, hosted_where
from tolaria.core.remote.hosts import parse_destination
alias, config, folder, flag = sys.argv[1:]
target = parse_destination(alias, ssh_config=config)
cache = HostedIndexCache(max_age_s=0.0)
where = hosted_where(alias, folder)
first = cache.load_from(target, where)
print(json.dumps({"fresh": cache.is_fresh(where)}), flush=True)
while not os.path.exists(flag + ".done"):
    open(flag, "w").close()
    time.sleep(0.1)
second = cache.load_from(target, where)
print(json.dumps({"before": sorted(first.listing.files), "after": sorted(second.listing.files)}))
"""


def test_a_file_added_there_is_listed_on_the_next_look(
        sshd: SshServer, shared: Path, remote_repo: str) -> None:
    """Stale (its age), the index is listed again: the folder's mtime changed, so the host
    sends the new listing (not "unchanged")."""
    home = shared / "home"
    flag = shared / "flag"
    proc = subprocess.Popen([*other_user_prefix(), other_user_python(),
                             "-c", CHANGED, ALIAS, str(sshd.config), remote_repo, str(flag)],
                            env=python_env(home), cwd=home, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.02)  # the mtime moves on (ns resolution)
        as_remote("touch", "added.txt", cwd=remote_repo)
        (shared / "flag.done").touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    lines = [json.loads(line) for line in out.strip().splitlines()]
    assert lines[0] == {"fresh": False}
    assert lines[1]["before"] == ["notes.txt"]
    assert lines[1]["after"] == ["added.txt", "notes.txt"]


CASE = ROOT / "tests" / "ui" / "remote_mentions_case.py"


def test_the_picker_in_a_chat_on_the_host_asks_ssh_and_lists_the_hosts_files(
        sshd: SshServer, shared: Path, remote_repo: str) -> None:
    """The whole window as the local user: ssh's host-key question is the chat's card (the
    window's askpass), then the host's files are offered and Enter inserts one."""
    as_remote("mkdir", "-p", "src", cwd=remote_repo)
    as_remote("touch", "src/app.py", "src/app notes.md", cwd=remote_repo)
    known = shared / "known_hosts"
    known.write_text("")
    config = shared / "ssh_config"
    config.write_text(
        f"Host target\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {REMOTE_USER}\n"
        f"  IdentityFile {sshd.client_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
        "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking ask\n  LogLevel ERROR\n")
    for path in (config, known):
        os.chown(path, sshd.local_uid, sshd.local_gid)
    home, shots, out = shared / "home", shared / "shots", shared / "case-out.json"
    shots.mkdir()
    os.chmod(shots, 0o777)
    case = shared / "case.json"
    case.write_text(json.dumps({"ssh_config": str(config), "folder": remote_repo,
                                "out": str(out), "shots": str(shots)}))
    env = python_env(home, TOLARIA_MENTIONS_CASE=str(case), QT_QPA_PLATFORM="offscreen")
    env.pop("SSH_AUTH_SOCK", None)
    done = as_other_user([other_user_python(), "-m", "pytest", "-x", "-q", "-p",
                          "no:cacheprovider", "-o", "addopts=", str(CASE)],
                         env=env, cwd=ROOT, timeout=180)
    assert done.returncode == 0 and out.exists(), (done.stdout + done.stderr)[-4000:]
    if os.environ.get("TOLARIA_DOCS_SHOTS") == "1":
        for picture in shots.glob("*.png"):
            shutil.copy(picture, ROOT / "docs" / picture.name)
    result = json.loads(out.read_text())
    assert result["listing"] == "Listing files on target…", result
    assert result["asked"]["kind"] == "confirm", result
    assert "Are you sure you want to continue connecting" in result["asked"]["prompt"]
    assert result["files"] == ["notes.txt", "src/app notes.md", "src/app.py"], result
    assert result["rows"][0] == "src/app.py", result
    assert result["title"].startswith(f"Files and folders in {os.path.basename(remote_repo)} "
                                      "on target · "), result
    assert result["text"] == "read @src/app.py ", result
    assert result["open_cards"] == 0


def test_tolaria_run_on_a_host_sends_a_mention_in_the_agents_form(
        sshd: SshServer, shared: Path, remote_repo: str) -> None:
    """``tolaria run --host``: the folder is listed there (one round trip) because the prompt
    mentions something; a listed path takes the agent's form (Claude's: a spaced path in
    quotes), one that is not there stays as typed."""
    as_remote("touch", "my notes.md", cwd=remote_repo)
    home = shared / "home"
    (home / "settings.toml").write_text(
        f'[hosts."{ALIAS}"]\nprograms = {{ demo = "/usr/bin/python3" }}\n'
        f'env = {{ PYTHONPATH = "{ROOT}" }}\n')
    done = as_other_user([other_user_python(), "-m", "tolaria", "run", "--host", ALIAS,
                          "--ssh-config", str(sshd.config), "--agent", "demo", "--cwd",
                          remote_repo, 'read @"my notes.md" and @gone.md'],
                         env=python_env(home), cwd=home, timeout=120)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert 'You asked "read "my notes.md" and @gone.md"' in done.stdout, done.stdout[-2000:]
