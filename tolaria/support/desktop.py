"""Desktop integration on Linux and the BSDs: an XDG ``.desktop`` entry and the icon, for the
current user, so the launcher and notifications show Tolaria's name and icon (the window sets
``QGuiApplication.setDesktopFileName("tolaria")``, which the entry's file name matches).

``install`` writes ``$XDG_DATA_HOME/applications/tolaria.desktop`` (default
``~/.local/share``) and ``icons/hicolor/scalable/apps/tolaria.svg`` (plus the PNG sizes that
``resources/`` ships), each atomically and only when its content differs (idempotent), then
refreshes the desktop and icon caches if those tools are installed, quietly. ``uninstall``
removes exactly the files ``install`` writes, and only when they are still Tolaria's (an entry
without the marker line a user wrote themselves is left alone).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tolaria.support import paths

APP_ID = "tolaria"
#: A line of every entry Tolaria writes: uninstall removes only such an entry.
MARKER = "X-Tolaria-Installed=true"
#: PNG sizes looked for in resources/ (``tolaria-<size>.png``).
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


class DesktopError(Exception):
    """One line saying why the desktop entry could not be installed or removed."""


@dataclass
class Outcome:
    """What install or uninstall did: the files written or removed, and the ones left."""

    changed: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)


def unsupported() -> str | None:
    """Why there is no XDG desktop integration on this system, or None."""
    if sys.platform == "darwin":
        return ("desktop integration is for Linux and the BSDs; on macOS, start Tolaria from a "
                "terminal (an app bundle is not made yet)")
    if sys.platform == "win32":
        return "desktop integration is for Linux and the BSDs; on Windows, use a shortcut to " \
               "'python -m tolaria'"
    return None


def data_home() -> Path:
    """``$XDG_DATA_HOME`` when it is an absolute path (the spec ignores a relative one), else
    ``~/.local/share``."""
    value = os.environ.get("XDG_DATA_HOME", "")
    return Path(value) if value and os.path.isabs(value) else Path.home() / ".local" / "share"


def launcher() -> list[str]:
    """How the entry starts Tolaria: the ``tolaria`` script next to this interpreter (a venv's
    bin/), else on PATH, else ``python -m tolaria`` with this interpreter, absolute."""
    beside = Path(sys.executable).parent / APP_ID
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside.absolute())]
    found = shutil.which(APP_ID)
    if found:
        return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", APP_ID]


def _exec_line(argv: list[str]) -> str:
    """The Exec value: each argument quoted as the Desktop Entry spec wants (double quotes,
    with ``"`, $, \\`` escaped) when it holds a reserved character; ``%`` doubled."""
    out = []
    for arg in argv:
        arg = arg.replace("%", "%%")
        if any(c in arg for c in " \t\n\"'\\><~|&;$*?#()`"):
            arg = '"' + "".join("\\" + c if c in '"`$\\' else c for c in arg) + '"'
        out.append(arg)
    return " ".join(out)


def entry_text(argv: list[str] | None = None) -> str:
    """The ``.desktop`` entry (resources/tolaria.desktop with Exec made absolute)."""
    template = (paths.package_data("resources") / f"{APP_ID}.desktop").read_text("utf-8")
    lines = []
    for line in template.splitlines():
        if line.startswith("Exec="):
            line = "Exec=" + _exec_line(argv or launcher())
        elif line.startswith("TryExec="):
            continue
        lines.append(line)
    lines.append(MARKER)
    return "\n".join(lines) + "\n"


def _icons() -> list[tuple[Path, Path]]:
    """(source in resources/, path under the data home) of every icon Tolaria ships."""
    resources = paths.package_data("resources")
    out = [(resources / f"{APP_ID}.svg", Path("icons/hicolor/scalable/apps") / f"{APP_ID}.svg")]
    for size in PNG_SIZES:
        png = resources / "icons" / f"{APP_ID}-{size}.png"
        if png.is_file():
            out.append((png, Path(f"icons/hicolor/{size}x{size}/apps") / f"{APP_ID}.png"))
    return out


def targets(home: Path | None = None) -> list[Path]:
    """Every file ``install`` writes (the entry first)."""
    base = home or data_home()
    return [base / "applications" / f"{APP_ID}.desktop", *(base / rel for _, rel in _icons())]


def _write(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically (0644); False when it already held exactly that."""
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return True


def _refresh(base: Path) -> None:
    """Refresh the caches a desktop reads, if their tools are there; quietly, never failing."""
    for argv in (["update-desktop-database", "-q", str(base / "applications")],
                 ["gtk-update-icon-cache", "-q", "-t", "-f", str(base / "icons" / "hicolor")]):
        tool = shutil.which(argv[0])
        if tool is None:
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([tool, *argv[1:]], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30,
                           check=False)


def install(home: Path | None = None, argv: list[str] | None = None) -> Outcome:
    """Write the entry and the icons (DesktopError with one line when it cannot)."""
    problem = unsupported()
    if problem:
        raise DesktopError(problem)
    base = home or data_home()
    files = targets(base)
    sources = [entry_text(argv).encode("utf-8"),
               *(src.read_bytes() for src, _ in _icons())]
    outcome = Outcome()
    try:
        for path, data in zip(files, sources, strict=True):
            (outcome.changed if _write(path, data) else outcome.unchanged).append(path)
    except OSError as exc:
        raise DesktopError(f"cannot write {exc.filename or base}: {exc.strerror or exc}") \
            from exc
    if outcome.changed:
        _refresh(base)
    return outcome


def uninstall(home: Path | None = None) -> Outcome:
    """Remove what ``install`` wrote; an entry that is not Tolaria's own is left (unchanged)."""
    problem = unsupported()
    if problem:
        raise DesktopError(problem)
    base = home or data_home()
    files = targets(base)
    ours = {data for _, data in ((s, s.read_bytes()) for s, _ in _icons())}
    outcome = Outcome()
    try:
        for n, path in enumerate(files):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            mine = MARKER.encode() in data.splitlines() if n == 0 else data in ours
            if mine:
                path.unlink()
                outcome.changed.append(path)
            else:
                outcome.unchanged.append(path)
    except OSError as exc:
        raise DesktopError(f"cannot remove {exc.filename or base}: {exc.strerror or exc}") \
            from exc
    if outcome.changed:
        _refresh(base)
    return outcome

