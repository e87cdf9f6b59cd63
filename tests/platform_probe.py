"""Import every Tolaria module with ``sys.platform`` faked: ``python platform_probe.py win32``.

Run in a subprocess by tests/support/test_platforms.py (one per platform: the fake must
not leak into the test process). Only Tolaria's own module bodies run under the fake. What they
import from the standard library and third parties is loaded first, on the real platform: those
are not ours to test, and several choose an implementation by ``sys.platform`` when imported
(asyncio and subprocess would load ``_winapi``, which Linux does not have). A Tolaria module
that imports a Windows-only module at import time therefore fails here; that is on purpose:
such imports belong inside the function that needs them.

Prints one JSON object: ``{"platform": ..., "imported": [...], "failed": {name: traceback},
"probes": {...}}``, the probes being what a few modules answer under the fake, so the test can
see that the fake reached Tolaria's code.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tolaria"
#: ``python -m tolaria`` runs the command line when imported: it is the one module not loaded.
NOT_IMPORTED = {"tolaria.__main__"}


def module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if name not in NOT_IMPORTED:
            names.append(name)
    return names


def dependencies() -> set[str]:
    """Every non-Tolaria module any Tolaria module names in an import statement."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] != "tolaria"}


def preload() -> None:
    """Load the dependencies on the real platform. One missing here (``msvcrt`` on Linux, or a
    ``from x import name`` that is not a module) is left for the faked import to run into."""
    for name in sorted(dependencies()):
        try:
            importlib.import_module(name)
        except Exception:  # ImportError mostly: a preload, not a check
            continue


def probes() -> dict[str, object]:
    from PySide6.QtWidgets import QApplication

    from tolaria.support import platforms, sockdir
    from tolaria.ui.window import actions, keymap

    app = QApplication.instance() or QApplication([])
    keys = keymap.current()
    del app
    return {
        "run_refusal": platforms.run_refusal(),
        "control_channel": platforms.control_channel(),
        "next_chat": list(keys.next_chat),
        "delete_chat": list(keys.delete_chat),
        "socket_dir_fits": sockdir.fits(sockdir.socket_dir()),
        # computed when tolaria.ui.window.actions was imported, under the fake
        "listed_next_chat": next(f.keys for f in actions.FIXED_SHORTCUTS
                                 if f.label == "Next chat"),
    }


def window_probe(shot: str | None) -> dict[str, object]:
    """The whole window (tolaria.app.main.Tolaria) under the fake: what it says and does when
    a chat is sent (only on win32, where nothing starts; elsewhere a run is not faked)."""
    import asyncio

    from PySide6.QtWidgets import QApplication, QLabel

    from tolaria.app.main import Tolaria, make_qapplication

    make_qapplication(["tolaria"])
    app = Tolaria(agent="demo", cwd=str(ROOT))

    async def go() -> dict[str, object]:
        await app.start()  # the control socket (not on Windows), the window shown
        pane = app.window.current_pane()  # the chat start() opened
        assert pane is not None
        conversation = app.store.get_conversation(pane.conversation_id)
        assert conversation is not None
        pane.composer.setPlainText("list the files")
        stream_id = (app.controller.send(conversation.id, "list the files")
                     if sys.platform == "win32" else None)
        QApplication.processEvents()
        if shot:
            app.window.grab().save(shot)
        problems = app.window.findChild(QLabel, "settingsProblems")
        answer: dict[str, object] = {
            "stream_id": stream_id,
            "status_message": app.window.statusBar().currentMessage(),
            "problems": problems.text() if problems is not None else None,
            "composer": pane.composer.toPlainText(),
            "turns": len(app.store.turns(conversation.id)),
            "live_runs": len(app.registry.live()),
            "control_started": app._control_started,
            "socket": app.control.path.exists(),
        }
        await app.shutdown()
        return answer

    return asyncio.run(go())


#: Programs for a POSIX host, each run only as its own process (ADR 0026): the remote
#: supervisor's modules. Runs are refused on Windows (ADR 0014), so the window never starts
#: them there; on Windows they refuse to load, with one reason. The supervisor package itself
#: loads anywhere: it is only its frames, which the local link and the MCP forms use.
POSIX_PROGRAMS = {*(f"tolaria.core.remote.supervisor.{path.stem}"
                    for path in (PACKAGE / "core/remote/supervisor").glob("*.py")
                    if path.stem not in ("__init__", "frames"))}  # frames: any platform


def main(platform: str, window: bool = False, shot: str | None = None) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    preload()
    if window:
        real = sys.platform
        sys.platform = platform
        try:
            answer = window_probe(shot)
        finally:
            sys.platform = real
        print(json.dumps(answer))
        return 0
    real = sys.platform
    sys.platform = platform
    imported: list[str] = []
    failed: dict[str, str] = {}
    for name in module_names():
        try:
            importlib.import_module(name)
        except BaseException:
            failed[name] = traceback.format_exc()
        else:
            imported.append(name)
    answers: dict[str, object] = {}
    if not set(failed) - (POSIX_PROGRAMS if platform == "win32" else set()):
        try:
            answers = probes()
        except BaseException:
            failed["probes"] = traceback.format_exc()
    sys.platform = real
    print(json.dumps({"platform": platform, "imported": imported, "failed": failed,
                      "probes": answers}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], window="--window" in sys.argv,
                  shot=sys.argv[sys.argv.index("--shot") + 1] if "--shot" in sys.argv else None))
