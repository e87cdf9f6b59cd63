"""Which agents a host has, with versions: the program Tolaria sends to the host (ADR 0034).

Standard library only, Python >= 3.8 (like the supervisor: ruff's per-file target version and
vermin check it). It is not installed there: the host runs ``python3 -c LOADER SIZE``, the loader
reads exactly SIZE bytes of this source from stdin and runs it, and this program reads the
request (JSON) from the rest of stdin. So the ssh command line is short and constant, and no
agent name or path ever passes through a shell unquoted.

The request names, per agent, the program a run would start and its version command. Each
program is found as the supervisor finds it when a run starts (``supervisor._resolve``): a path
is taken as it is, a name is looked up on PATH (the ssh session's, with the host's and the
agent's environment applied), then through the user's login shell (``$SHELL -lc``, one shell
for all names, run with the session's own environment as the supervisor runs it;
tests/remote/test_agent_probe_static.py holds the two to the same answers). Version commands run at once, each in its own session, killed with its group
when it takes too long. The answer is one line, ``TOLARIA-AGENTS {json}``: a login shell's
banners may come first.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading

MARK = "TOLARIA-AGENTS "
#: What the login shell prints before each name's answer (its rc files may print too).
WORD = "__TOLARIA_W__"
_VERSION = re.compile(r"\d+\.\d+")
#: The shell script that answers ``command -v`` for every name given after ``sh``: no name is
#: ever part of the script.
SHELL_SCRIPT = 'for p in "$@"; do printf "%s%s\\t%s\\n" "' + WORD + '" "$p" "$(command -v "$p")"; done'


def login_shell_paths(names: list[str], env: dict[str, str], timeout: float) -> dict[str, str]:
    """Each name's path as the login shell finds it (only absolute answers count). As in
    ``supervisor._resolve``: the shell is ``env``'s SHELL (the host's settings may name one), run
    with the session's own environment (a login shell builds its PATH from its profile)."""
    if not names:
        return {}
    shell = env.get("SHELL") or "/bin/sh"
    try:
        done = subprocess.run([shell, "-lc", SHELL_SCRIPT, "sh", *names],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=timeout, check=False,
                              start_new_session=True)
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {}
    for line in done.stdout.decode(errors="replace").splitlines():
        if line.startswith(WORD) and "\t" in line:
            name, _, path = line[len(WORD):].partition("\t")
            if os.path.isabs(path.strip()):
                found[name] = path.strip()
    return found


def run_version(argv: list[str], env: dict[str, str], timeout: float) -> tuple[str | None, str | None]:
    """(the version line, None) or (None, the reason in one line)."""
    label = " ".join([os.path.basename(argv[0]), *argv[1:]])
    try:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return None, f"cannot run {argv[0]}: {exc.strerror or exc}"
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            if sys.platform == "win32":  # not a host Tolaria supports; said by the supervisor
                proc.kill()
            else:  # the version command and whatever it started (its own session)
                os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, (f"`{label}` timed out after {timeout:g} s (it may be waiting for a first-run "
                      "setup: try it in a terminal there)")
    lines = [x.strip() for x in out.decode(errors="replace").splitlines() if x.strip()]
    first = lines[0][:200] if lines else ""
    if proc.returncode != 0:
        said = ": " + first if first else " and printed nothing"
        hint = (" (a program it needs, such as node, may be missing from PATH there)"
                if proc.returncode == 127 else "")
        return None, f"`{label}` exited with code {proc.returncode}{said}{hint}"
    line = next((x for x in lines if _VERSION.search(x)), first)
    return (line[:200] or None), None


def probe(request: dict) -> dict:  # type: ignore[type-arg]
    timeout = float(request.get("timeout") or 5.0)
    base = dict(os.environ)
    base.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
    agents = [a for a in request.get("agents") or [] if isinstance(a, dict)]
    envs = []
    for agent in agents:
        env = dict(base)
        env.update({str(k): str(v) for k, v in (agent.get("env") or {}).items()})
        envs.append(env)
    results = [{"id": a.get("id"), "path": None, "source": None, "version": None,
                "error": None} for a in agents]
    missing: dict[str, list[int]] = {}
    for i, agent in enumerate(agents):
        program = str(agent.get("program") or "")
        if os.sep in program:
            program = os.path.expanduser(program)
            if os.access(program, os.X_OK) and not os.path.isdir(program):
                results[i].update(path=program, source="settings" if agent.get("set") else "path")
            else:
                results[i]["error"] = f"{program} is not an executable file on this host"
            continue
        found = shutil.which(program, path=envs[i].get("PATH")) if program else None
        if found:
            results[i].update(path=found, source="PATH")
        elif program:
            missing.setdefault(program, []).append(i)
    if missing:
        shell_found = login_shell_paths(sorted(missing), base, timeout * 2)
        for name, where in missing.items():
            for i in where:
                if name in shell_found:
                    results[i].update(path=shell_found[name], source="login shell")
                else:
                    results[i]["error"] = (f"{name} is not installed on this host (not found on "
                                           "PATH or through the login shell)")

    def version(i: int) -> None:
        argv = [str(x) for x in agents[i].get("version") or []]
        path = results[i]["path"]
        if not argv or path is None:
            return
        if agents[i].get("same"):  # the version command runs the agent's own program
            argv[0] = path
        results[i]["version"], results[i]["error"] = run_version(argv, envs[i], timeout)

    threads = [threading.Thread(target=version, args=(i,)) for i in range(len(agents))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"agents": results, "python": platform.python_version(),
            "system": platform.system(), "machine": platform.machine(),
            "shell": base.get("SHELL") or "/bin/sh"}


def main() -> int:
    data = sys.stdin.buffer.read()
    try:
        request = json.loads(data.decode())
    except ValueError:
        request = None
    if not isinstance(request, dict):
        sys.stdout.write(MARK + json.dumps({"error": "the request was damaged"}) + "\n")
        return 2
    sys.stdout.write(MARK + json.dumps(probe(request)) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
