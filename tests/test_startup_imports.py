"""The window's start-up does not import the SDKs it needs only on demand (the MCP SDK and its
web stack: ~50 MB of RSS for Preferences' Test of an MCP server; the ACP SDK: at an ACP run)."""

from __future__ import annotations

import subprocess
import sys

LAZY = ("mcp", "starlette", "httpx", "acp", "pydantic")


def test_the_window_module_leaves_the_heavy_sdks_unimported() -> None:
    code = ("import sys, tolaria.app.main, tolaria.app.prefs\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({LAZY!r})))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]", result.stdout
