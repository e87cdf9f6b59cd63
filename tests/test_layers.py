"""The package's layering is a contract, not a convention (docs/ARCHITECTURE.md).

Every import in tolaria/ is read with ``ast``: module-level ones, those inside functions (lazy
imports), those under ``if TYPE_CHECKING`` and ``importlib.import_module("literal")``. Then:

- layers, lowest first: support < core < config < chats < qt < ui < app/cli. A module imports
  its own layer or a lower one, never a higher one (``tolaria/__init__``, ``__main__`` and
  ``demo_agent`` stand apart: the root holds only the version, ``__main__`` only starts the CLI,
  the demo agent is a separate program and imports no Tolaria module);
- no import cycle between modules, at any level: a lazy or type-only import that closes a
  circle still makes the modules one tangle that cannot be read or tested apart;
- nothing below tolaria/qt names Qt (PySide6, shiboken, qasync), and importing the core and the
  CLI really loads none of it (the headless CLI must run where Qt is not installed).
"""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tolaria"
LAYERS = ("support", "core", "config", "chats", "qt", "ui", "app|cli")
QT_MODULES = ("PySide6", "shiboken6", "shiboken", "qasync", "PyQt5", "PyQt6")
#: May be imported by any module; imports no Tolaria module itself.
ROOT_MODULE = "tolaria"
#: Stand apart from the layers: imported by no Tolaria module.
STANDALONE = {"tolaria.__main__": None, "tolaria.demo_agent": ()}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def tolaria_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_names(path: Path, name: str) -> Iterator[tuple[str, int]]:
    """(dotted name, line) of every import in ``path``, at any depth, absolute."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base, node.lineno
            for alias in node.names:  # ``from pkg import module`` imports the module
                yield f"{base}.{alias.name}", node.lineno
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.args[0].value, node.lineno


def import_graph() -> dict[str, dict[str, int]]:
    """Module -> {Tolaria module it imports (or a package on the way to one): line}."""
    modules = tolaria_modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        for target, line in imported_names(path, name):
            parts = target.split(".")
            # The target and the packages whose __init__ importing it runs (not the importer's
            # own, which ran before it).
            for i in range(1, len(parts) + 1):
                candidate = ".".join(parts[:i])
                if candidate in modules and candidate != name and candidate not in ancestors:
                    edges.setdefault(candidate, line)
        graph[name] = edges
    return graph


def layer(name: str) -> int | None:
    parts = name.split(".")
    if len(parts) < 2:
        return None
    for index, names in enumerate(LAYERS):
        if parts[1] in names.split("|"):
            return index
    return None


def test_every_module_has_a_layer() -> None:
    unplaced = [name for name in tolaria_modules()
                if name != ROOT_MODULE and name not in STANDALONE and layer(name) is None]
    assert unplaced == [], f"modules outside every layer (place them, or name them here): {unplaced}"


def test_no_module_imports_a_higher_layer() -> None:
    graph = import_graph()
    modules = tolaria_modules()
    wrong = []
    for name, edges in graph.items():
        for target, line in edges.items():
            where = f"{modules[name].relative_to(ROOT)}:{line}: {name} imports {target}"
            if target in STANDALONE:
                wrong.append(f"{where} (standalone: imported by nothing)")
            elif name == ROOT_MODULE:
                wrong.append(f"{where} (the package root imports nothing)")
            elif name in STANDALONE:
                allowed = STANDALONE[name]
                if allowed is not None and target not in allowed and target != ROOT_MODULE:
                    wrong.append(f"{where} (standalone: imports no Tolaria module)")
            elif target != ROOT_MODULE:
                mine, theirs = layer(name), layer(target)
                assert mine is not None and theirs is not None
                if theirs > mine:
                    wrong.append(f"{where} ({LAYERS[mine]} is below {LAYERS[theirs]})")
    assert wrong == [], "layer violations:\n" + "\n".join(wrong)


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import cycle (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_find_cycle_reports_a_cycle() -> None:
    """The checker itself: a lazy two-module circle is found and named in order."""
    graph = {"a": {"b": 1}, "b": {"c": 3}, "c": {"b": 9}, "d": {}}
    assert find_cycle(graph) == ["b", "c", "b"]
    assert find_cycle({"a": {"b": 1}, "b": {}}) is None


def test_imports_see_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    """The parser sees what a plain ``import`` scan would miss."""
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from tolaria.core.events import Done\n"
        "def f() -> None:\n    from tolaria.qt import bridge\n"
        "    import importlib\n    importlib.import_module('tolaria.ui.theme')\n",
        encoding="utf-8")
    names = {name for name, _ in imported_names(source, "tolaria.core.mod")}
    assert {"tolaria.core.events", "tolaria.qt.bridge", "tolaria.ui.theme"} <= names


def test_no_import_cycle() -> None:
    graph = import_graph()
    cycle = find_cycle(graph)
    if cycle is None:
        return
    modules = tolaria_modules()
    steps = [f"  {modules[a].relative_to(ROOT)}:{graph[a][b]}: {a} -> {b}"
             for a, b in itertools.pairwise(cycle)]
    raise AssertionError("import cycle:\n" + "\n".join(steps))


def test_only_callers_above_the_core_import_the_runner() -> None:
    """The runner chooses the turn kind, so it imports every kind: none of the core imports it
    (a turn needing ``RunRequest`` takes it from its leaf, core/turns/request.py)."""
    runner = "tolaria.core.turns.runner"
    core = LAYERS.index("core")
    importers = [name for name, edges in import_graph().items()
                 if runner in edges and layer(name) == core]
    assert importers == []


def test_nothing_below_qt_imports_qt() -> None:
    qt_layer = LAYERS.index("qt")
    offenders = []
    for name, path in tolaria_modules().items():
        mine = layer(name)
        if mine is not None and mine >= qt_layer:
            continue
        for target, line in imported_names(path, name):
            if target.split(".")[0] in QT_MODULES:
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {target}")
    assert offenders == [], "Qt below tolaria/qt:\n" + "\n".join(offenders)


def test_core_sources_do_not_name_qt() -> None:
    """Not even in a string: the core reports through plain callbacks (STYLE.md)."""
    offenders = [f"{path.relative_to(ROOT)}: {needle}"
                 for path in sorted((PACKAGE / "core").rglob("*.py"))
                 for needle in ("PySide6", "qasync", "PyQt")
                 if needle in path.read_text(encoding="utf-8")]
    assert offenders == []


def test_importing_core_and_cli_loads_no_qt() -> None:
    code = (
        "import sys, pkgutil, importlib, tolaria.core, tolaria.cli.main\n"
        "for m in pkgutil.walk_packages(tolaria.core.__path__, 'tolaria.core.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = [m for m in sys.modules if m.startswith(('PySide6', 'qasync', 'shiboken'))]\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
