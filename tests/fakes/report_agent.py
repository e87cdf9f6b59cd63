#!/usr/bin/env python3
"""A "lines" agent that reports how it was started: one JSON line with its argv, its working
folder and the environment variables named in ``REPORT_ENV`` (comma-separated), then exits 0.
``REPORT_EXIT`` makes it print an error on stderr and exit with that code instead.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    code = int(os.environ.get("REPORT_EXIT", "0"))
    if code:
        print(f"report agent: failing on purpose with code {code}", file=sys.stderr, flush=True)
        return code
    names = [n for n in os.environ.get("REPORT_ENV", "").split(",") if n]
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(),
                      "env": {n: os.environ.get(n) for n in names}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
