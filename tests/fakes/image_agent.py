"""A fake agent that takes images as ``--image FILE`` arguments (a manifest's ``images =
"args"``) and says what it got: ``python tests/fakes/image_agent.py [--image FILE]... -- PROMPT``.

Prints ``prompt: <prompt>`` and, per image, ``image <name> <sha256 of its bytes>``. A prompt
holding ``WAIT`` first waits (up to 60 s) until a file named ``release`` appears in its working
folder, so a test can queue messages while it runs. Exits 0.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time


def main(argv: list[str]) -> int:
    images: list[str] = []
    while argv and argv[0] == "--image":
        images.append(argv[1])
        argv = argv[2:]
    prompt = " ".join(argv[1:] if argv[:1] == ["--"] else argv)
    if "WAIT" in prompt:
        deadline = time.monotonic() + 60
        while not os.path.exists("release") and time.monotonic() < deadline:
            time.sleep(0.02)
    print(f"prompt: {prompt}", flush=True)
    for path in images:
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        print(f"image {os.path.basename(path)} {digest}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
