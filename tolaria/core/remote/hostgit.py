# Tolaria's git runner on a host (ADR 0035): one batch of operations per ssh round trip.
# Standard library only, Python >= 3.8 (vermin and ruff's per-file target check it); shipped
# content-addressed like the supervisor (bootstrap.py) and run as "python3 -c BOOTSTRAP ...".
#
# Protocol: prints "TOLARIA-OK", reads one JSON request from stdin until EOF
# ({"ops": [...], "safe": [config pairs]}), runs the operations in order and prints one JSON
# line: {"results": [...]} (bytes base64-encoded). An operation that fails ends the batch with
# {"error": "one line"} as its result. Paths come in JSON, never through a shell.
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zlib
from collections import deque
from typing import Any, Callable, Dict

Req = Dict[str, Any]

GIT_TIMEOUT = 60
_DROP = ("SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", "EDITOR", "VISUAL", "PAGER", "LESS")
_SAFE: list[str] = []  # the -c pairs the caller sends (gitrun.SAFE_CONFIG)


class Failed(Exception):
    pass


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text.encode("ascii")) if text else b""


def git_env(extra: dict[str, str] | None, user_config: bool = False) -> dict[str, str]:
    env = dict((k, v) for k, v in os.environ.items()
               if not k.startswith("GIT_") and k not in _DROP)
    env.update({"GIT_AUTHOR_NAME": "Tolaria", "GIT_AUTHOR_EMAIL": "tolaria@localhost",
                "GIT_COMMITTER_NAME": "Tolaria", "GIT_COMMITTER_EMAIL": "tolaria@localhost",
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C",
                "GIT_PAGER": "cat", "GIT_NO_REPLACE_OBJECTS": "1", "GIT_ASKPASS": "false",
                "GIT_EDITOR": "false", "GIT_SSH_COMMAND": "false", "GIT_LFS_SKIP_SMUDGE": "1"})
    env.update(extra or {})
    if user_config:  # the user's own excludes (core.excludesFile) apply, as for ls-files here
        env.pop("GIT_CONFIG_GLOBAL")
    return env


def git(argv: list[str], cwd: str | None = None, stdin: bytes | None = None,
        env: dict[str, str] | None = None, user_config: bool = False,
        ) -> tuple[int, bytes, bytes]:
    full = ["git"]
    for pair in _SAFE:
        full += ["-c", pair]
    try:
        done = subprocess.run(full + list(argv), cwd=cwd, input=stdin or b"",
                              capture_output=True, env=git_env(env, user_config),
                              timeout=GIT_TIMEOUT)
    except FileNotFoundError:
        raise Failed("git is not installed on this host") from None
    except subprocess.TimeoutExpired:
        raise Failed(f"git {argv[0]} took longer than {GIT_TIMEOUT} s") from None
    return done.returncode, done.stdout, done.stderr


def checked(argv: list[str], cwd: str | None = None, stdin: bytes | None = None,
            env: dict[str, str] | None = None) -> bytes:
    rc, out, err = git(argv, cwd, stdin, env)
    if rc != 0:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        raise Failed(f"git {argv[0]} failed: {lines[-1] if lines else rc}")
    return out


def layout(folder: str) -> tuple[str, str, str]:
    """(top, common dir, git dir) of the work tree holding folder."""
    if not os.path.isdir(folder):
        raise Failed(f"{folder} is not a folder on this host")
    rc, out, _err = git(["rev-parse", "--is-inside-work-tree", "--show-toplevel",
                         "--git-common-dir", "--git-dir"], cwd=folder)
    lines = out.decode("utf-8", "surrogateescape").splitlines()
    if rc != 0 or len(lines) < 4 or lines[0] != "true":
        raise Failed(f"{folder} is not inside a git working tree")
    top = lines[1]
    common = os.path.normpath(os.path.join(folder, lines[2]))
    gitdir = os.path.normpath(os.path.join(folder, lines[3]))
    return top, common, gitdir


def store_of(common: str) -> str:
    """Tolaria's store for this repository on the host: a bare repository borrowing its
    objects, outside the repository (its refs are never pushed or listed with it)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "share")
    folder = os.path.join(base, "tolaria", "checkpoints", "stores")
    store = os.path.join(folder, hashlib.sha256(os.path.realpath(common).encode(
        "utf-8", "surrogateescape")).hexdigest()[:24] + ".git")
    if not os.path.isfile(os.path.join(store, "HEAD")):
        # Made aside and renamed into place: another Tolaria may make the same store at once.
        os.makedirs(folder, 0o700, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".new-", dir=folder)
        try:
            checked(["init", "--quiet", "--bare", "--template=", tmp])
            try:
                os.rename(tmp, store)
            except OSError:
                if not os.path.isfile(os.path.join(store, "HEAD")):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    alternates = os.path.join(store, "objects", "info", "alternates")
    want = os.path.join(os.path.realpath(common), "objects") + "\n"
    try:
        with open(alternates) as fh:
            have = fh.read()
    except OSError:
        have = ""
    if have != want:  # another Tolaria may do the same at once: whole or not at all
        os.makedirs(os.path.dirname(alternates), exist_ok=True)
        tmp = f"{alternates}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            fh.write(want)
        os.replace(tmp, alternates)
    return store


def in_store(folder: str) -> tuple[str, str, dict[str, str]]:
    top, common, _gitdir = layout(folder)
    store = store_of(common)
    return top, store, {"GIT_DIR": store, "GIT_WORK_TREE": top}


def op_repo(req: Req) -> Req:
    try:
        top = layout(req["folder"])[0]
    except Failed:
        return {"top": None}
    real = os.path.realpath(top)
    if real in ("/", os.path.realpath(os.path.expanduser("~"))):
        return {"top": None, "wide": True}  # snapshotting it would hash everything there
    return {"top": top}


def op_git(req: Req) -> Req:
    """git in Tolaria's store with the work tree of req["folder"] (or in req["cwd"])."""
    cwd: str | None = req.get("cwd")
    env: dict[str, str] = {}
    if req.get("folder"):
        cwd, store, env = in_store(req["folder"])
        env["GIT_INDEX_FILE"] = os.path.join(store, "index")
    rc, out, err = git(req["argv"], cwd=cwd, stdin=unb64(req.get("stdin")), env=env)
    return {"rc": rc, "out": b64(out), "err": b64(err)}


def _heavy(path: str, heavy: set[str]) -> str | None:
    return next((p for p in path.split("/")[:-1] if p in heavy), None)


def op_snapshot(req: Req) -> Req:
    """The work tree (tracked, and untracked not ignored within limits) as a commit under
    req["ref"] in the store: a copy of the user's index, never the index itself."""
    top, common, gitdir = layout(req["folder"])
    store = store_of(common)
    limits = req.get("limits") or {}
    cap = int(limits.get("max_file_bytes", 10 << 20))
    most = int(limits.get("max_files", 5000))
    budget = int(limits.get("max_bytes", 50 << 20))
    heavy = set(limits.get("heavy_dirs") or ())
    skipped: Req = {"large": [], "heavy": [], "unreadable": [], "over_budget": [], "filtered": [],
               "untracked_off": False, "max_file_bytes": cap}
    exclude = os.path.join(common, "info", "exclude")
    tmp = tempfile.mkdtemp(prefix="tolaria-ck-")
    try:
        index = os.path.join(tmp, "index")
        if os.path.isfile(os.path.join(gitdir, "index")):
            shutil.copyfile(os.path.join(gitdir, "index"), index)
        env = {"GIT_DIR": store, "GIT_WORK_TREE": top, "GIT_INDEX_FILE": index}
        ex = ["-c", "core.excludesFile=" + (exclude if os.path.isfile(exclude) else os.devnull)]
        checked([*ex, "add", "--update", "--", "."], cwd=top, env=env)
        out = checked([*ex, "ls-files", "-z", "--others", "--exclude-standard"], cwd=top,
                      env=env)
        taken: list[bytes] = []
        total = 0
        heavy_seen: set[str] = set()
        for raw in out.split(b"\0"):
            if not raw:
                continue
            name = raw.decode("utf-8", "surrogateescape")
            dirname = _heavy(name, heavy)
            if dirname is not None:
                heavy_seen.add(name[:name.index(dirname + "/") + len(dirname)] + "/")
                continue
            try:
                size = os.lstat(os.path.join(top, name)).st_size
            except OSError:
                skipped["unreadable"].append(name)
                continue
            if size > cap:
                skipped["large"].append(name)
            elif len(taken) >= most or total + size > budget:
                skipped["over_budget"].append(name)
            else:
                taken.append(raw)
                total += size
        skipped["heavy"] = sorted(heavy_seen)
        if taken:
            checked([*ex, "add", "--pathspec-from-file=-", "--pathspec-file-nul", "--"],
                    cwd=top, env=dict(env, GIT_LITERAL_PATHSPECS="1"),
                    stdin=b"\0".join(taken) + b"\0")
        tree = checked(["write-tree"], cwd=top, env=env).decode().strip()
        message = "tolaria checkpoint {}\n\n{}\n".format(req["ref"], json.dumps({"skipped": skipped}))
        commit = checked(["commit-tree", tree], cwd=top, env=env,
                         stdin=message.encode()).decode().strip()
        if req["ref"]:  # none: the state now, compared and forgotten
            checked(["update-ref", req["ref"], commit], cwd=top, env=env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"top": top, "commit": commit, "skipped": skipped}


def _inside(repo: str, path: str) -> str:
    if not path or os.path.isabs(path) or ".." in path.split("/"):
        raise Failed("%s is outside the working tree" % (path or "(empty)"))
    target = os.path.join(repo, path)
    parent = os.path.realpath(os.path.dirname(target))
    top = os.path.realpath(repo)
    if parent != top and not parent.startswith(top.rstrip("/") + "/"):
        raise Failed(f"{path} is outside the working tree")
    return target


def _blob_id(data_len: int, chunks: list[bytes], sha256: bool) -> str:
    digest = hashlib.sha256() if sha256 else hashlib.sha1()
    digest.update(b"blob %d\0" % data_len)
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def _state(repo: str, path: str, sha256: bool) -> list[str]:
    target = os.path.join(repo, path)
    if not path or os.path.isabs(path) or ".." in path.split("/"):
        raise Failed("%s is outside the working tree" % (path or "(empty)"))
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return ["missing", "", ""]
    except NotADirectoryError:
        return ["under-file", "", ""]
    if stat.S_ISLNK(info.st_mode):
        link = os.fsencode(os.readlink(target))
        return ["link", "120000", _blob_id(len(link), [link], sha256)]
    if stat.S_ISDIR(info.st_mode):
        return ["submodule" if os.path.exists(os.path.join(target, ".git")) else "folder", "", ""]
    if not stat.S_ISREG(info.st_mode):
        return ["special", "", ""]
    mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
    try:
        with open(target, "rb") as fh:  # in pieces: a 300 MB file is not held in memory
            size = os.fstat(fh.fileno()).st_size
            digest = hashlib.sha256() if sha256 else hashlib.sha1()
            digest.update(b"blob %d\0" % size)
            read = 0
            chunk = fh.read(1 << 20)
            while chunk:
                digest.update(chunk)
                read += len(chunk)
                chunk = fh.read(1 << 20)
            if read == size:
                return ["file", mode, digest.hexdigest()]
            fh.seek(0)
            data = fh.read()  # written while being read: hash what is there now, whole
    except PermissionError:
        return ["unreadable", "", ""]
    return ["file", mode, _blob_id(len(data), [data], sha256)]


def op_states(req: Req) -> Req:
    repo = req["repo"]
    rc, out, _err = git(["rev-parse", "--show-object-format"], cwd=repo)
    sha256 = rc == 0 and out.strip() == b"sha256"
    return {"states": [_state(repo, p, sha256) for p in req["paths"]]}


def op_read(req: Req) -> Req:
    with open(_inside(req["repo"], req["path"]), "rb") as fh:
        return {"data": b64(fh.read())}


def op_write(req: Req) -> Req:
    """Replace a file in one rename (readers see the old or the new content), or delete it."""
    target = _inside(req["repo"], req["path"])
    if req.get("delete"):
        if os.path.islink(target) or os.path.isfile(target):
            os.unlink(target)
        return {}
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.isdir(target) and not os.path.islink(target):
        raise Failed("{} is a folder now: not replaced".format(req["path"]))
    tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.tolaria-restore")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    data = unb64(req.get("data"))
    if req.get("mode") == "120000":
        os.symlink(data.decode("utf-8", "surrogateescape"), tmp)
    else:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o755 if req.get("mode") == "100755" else 0o644)
    os.replace(tmp, target)
    return {}


def walk_tree(root: str, heavy: Any, limit: int, seconds: float,
              stopped: Callable[[], bool] | None = None,
              ) -> tuple[list[str], list[str], bool]:
    """The bounded walk of ``@``'s listing, here and on a host (chats/mentions/listing.py gives
    the rules): breadth first, no symlinked folder followed, ``heavy`` folders skipped, at most
    ``limit`` entries or ``seconds``. (files, sorted folders, truncated); ``stopped()`` true:
    it returns what it has (the caller raises its own cancel)."""
    deadline = time.monotonic() + seconds
    files: list[str] = []
    folders: list[str] = []
    pending = deque([""])
    truncated = False
    while pending:
        if stopped is not None and stopped():
            break
        if len(files) + len(folders) >= limit or time.monotonic() > deadline:
            truncated = True
            break
        rel = pending.popleft()
        try:
            with os.scandir(os.path.join(root, rel) if rel else root) as entries:
                found = sorted(entries, key=lambda e: e.name)
        except OSError:
            continue
        for entry in found:
            name = rel + "/" + entry.name if rel else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name in heavy:
                    continue
                folders.append(name)
                pending.append(name)
            else:
                files.append(name)
    if len(files) + len(folders) > limit:
        truncated = True
    return files[:limit], sorted(folders), truncated


def _packed(names: list[bytes], most: int) -> tuple[str, bool]:
    """NUL-separated, zlib-compressed, base64: any name survives (a space, a newline); at most
    ``most`` bytes of names (the rest cut: True)."""
    total, kept = 0, 0
    for name in names:
        total += len(name) + 1
        if total > most:
            break
        kept += 1
    return b64(zlib.compress(b"\0".join(names[:kept]), 6)), kept < len(names)


def _stamp(folder: str) -> list[int]:
    def mtime(path: str) -> int:
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return 0
    return [mtime(folder), mtime(os.path.join(folder, ".git", "index"))]


def op_files(req: Req) -> Req:
    """What ``@`` offers in req["folder"]: git's tracked plus untracked-not-ignored files, else
    the bounded walk, with the rules the request brings (the same as this machine's). Answers
    {"unchanged": true} when req["stamp"] (the folder's and git's index mtimes) still holds."""
    folder = os.path.abspath(os.path.expanduser(req["folder"]))  # as typed: ~/app, app
    if not os.path.isdir(folder):
        raise Failed("{} is not a folder on this host".format(req["folder"]))
    stamp = _stamp(folder)
    if req.get("stamp") == stamp:
        return {"unchanged": True, "stamp": stamp, "folder": folder}
    most = int(req.get("most_bytes") or 32 << 20)
    try:
        rc, out, _err = git(["ls-files", "-co", "--exclude-standard", "-z"], cwd=folder,
                            user_config=True)
    except Failed:  # no git there, or it hung: the walk, as here
        rc, out = 1, b""
    if rc == 0:
        names = list(dict.fromkeys(n for n in out.split(b"\0") if n))
        files, cut = _packed(names, most)
        return {"source": "git", "files": files, "truncated": cut, "stamp": stamp,
                "folder": folder}
    found, dirs, truncated = walk_tree(folder, set(req.get("heavy") or ()),
                                       int(req.get("limit") or 200_000),
                                       float(req.get("seconds") or 10.0))
    files, cut = _packed([os.fsencode(n) for n in found], most)
    folders, cut_dirs = _packed([os.fsencode(n) for n in dirs], most)
    return {"source": "walk", "files": files, "folders": folders,
            "truncated": truncated or cut or cut_dirs, "stamp": stamp, "folder": folder}


OPS: dict[str, Callable[[Req], Req]] = {"repo": op_repo, "git": op_git, "snapshot": op_snapshot, "states": op_states,
       "read": op_read, "write": op_write, "files": op_files}


def main() -> None:
    sys.stdout.write("TOLARIA-OK\n")
    sys.stdout.flush()
    chunks: list[bytes] = []
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    request = json.loads(b"".join(chunks).decode("utf-8", "surrogateescape"))
    _SAFE[:] = request.get("safe") or []
    results: list[Req] = []
    for op in request.get("ops") or []:
        try:
            results.append(OPS[op["op"]](op))
        except (Failed, OSError, KeyError, ValueError) as exc:
            said = str(exc) if isinstance(exc, Failed) else "{}: {}".format(
                type(exc).__name__, getattr(exc, "strerror", None) or exc)
            results.append({"error": said})
            break
    sys.stdout.write(json.dumps({"results": results}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
