"""Tolaria's ``SSH_ASKPASS`` program (ADR 0033): ``python -m tolaria.core.remote.askpass PROMPT``.

ssh runs it (through the wrapper script of askpass_desk.py, as ``SSH_ASKPASS`` must be one
program path) when it has a question: an unknown host key, a key's passphrase, a password. It
hands ssh's own words to the window over the desk's Unix socket (its path and this run's token
in the environment), waits for the user, and prints the answer for ssh. No answer, Cancel, a
closed window, a wrong token, a timeout: exit 1, which ssh takes as a refusal.

Standard library only and small: it starts once per question, and never writes the answer
anywhere but its stdout (the pipe ssh reads).
"""

from __future__ import annotations

import json
import os
import socket
import sys

SOCKET_ENV = "TOLARIA_ASKPASS_SOCKET"
TOKEN_ENV = "TOLARIA_ASKPASS_TOKEN"
#: How long the program waits for the window at most: a little over the desk's own timeout,
#: so the desk's refusal (and its card going away) normally comes first.
WAIT_S_ENV = "TOLARIA_ASKPASS_WAIT_S"
DEFAULT_WAIT_S = 330.0
#: The largest reply read from the desk (a password is short; anything bigger is refused).
_MAX_REPLY = 64 * 1024


def ask(prompt: str, hint: str, path: str, token: str, wait_s: float) -> str | None:
    """The user's answer to ``prompt``, or None for a refusal."""
    if sys.platform == "win32":  # no AF_UNIX there: the window keeps ssh in BatchMode
        return None
    request = json.dumps({"token": token, "prompt": prompt, "hint": hint}).encode() + b"\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(wait_s)
        sock.connect(path)
        sock.sendall(request)
        reply = b""
        while not reply.endswith(b"\n") and len(reply) < _MAX_REPLY:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    answer = json.loads(reply.decode("utf-8")) if reply.endswith(b"\n") else {}
    if not isinstance(answer, dict) or not answer.get("ok"):
        return None
    text = answer.get("answer", "")
    return text if isinstance(text, str) else None


def main(argv: list[str]) -> int:
    prompt = argv[1] if len(argv) > 1 else ""
    # OpenSSH says what kind of answer it wants: "confirm" (yes/no by exit code), "none"
    # (a notice to show), or nothing (text; its host-key question is text too: "yes").
    hint = os.environ.get("SSH_ASKPASS_PROMPT", "")
    path, token = os.environ.get(SOCKET_ENV, ""), os.environ.get(TOKEN_ENV, "")
    if not path or not token:
        sys.stderr.write("tolaria askpass: no window to ask (run from Tolaria's ssh only)\n")
        return 1
    try:
        wait_s = float(os.environ.get(WAIT_S_ENV) or DEFAULT_WAIT_S)
        answer = ask(prompt, hint, path, token, wait_s)
    except (OSError, ValueError):
        return 1
    if answer is None:
        return 1
    if hint != "none":
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
