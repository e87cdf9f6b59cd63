"""What a Revert / Rewind / Undo would do, said before it does it (tolaria/chats/restore.py).

A ``RestorePlan`` lists each file with what will happen to it and, when it changed after the
turn (the user's edits, another program's, a later turn's), says so; a file that cannot be
restored blocks the whole plan with its reason. The window shows it as the inline confirm and
``tolaria revert/rewind/undo`` prints it; the user's "go ahead" names the plan's
``fingerprint``, so a file that changes while the confirm is shown makes the plan shown again
instead of being overwritten. No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass

REVERT, REWIND, HUNK, UNDO = "revert", "rewind", "hunk", "undo"
#: A confirmation for whatever the plan says (``--yes``).
YES = "yes"

#: FilePlan actions.
RESTORE, DELETE, MERGE = "restore", "delete", "merge"


@dataclass(frozen=True)
class FilePlan:
    """One file: ``action`` (restore its old bytes, delete it, or merge: take the turn's change
    out and keep the later ones), what changed since (``later``, "" none), a ``blocker``."""

    path: str
    action: str
    later: str = ""
    blocker: str = ""

    def line(self) -> str:
        if self.blocker:
            return f"{self.path} {self.blocker}"
        if self.action == MERGE:
            return (f"{self.path}: {self.later}; only this turn's changes are taken out, "
                    "the later edits stay")
        what = {RESTORE: "put back as it was", DELETE: "deleted (it did not exist then)"}.get(
            self.action, "put back as it was")
        if self.later:
            return f"{self.path}: {self.later}; {what}, the later edits go too"
        return f"{self.path}: {what}"


@dataclass(frozen=True)
class RestorePlan:
    """What one Revert / Rewind / Undo would do; ``needs_confirm`` / ``blocked`` say whether it
    may go ahead at once."""

    kind: str
    turn_id: int
    files: tuple[FilePlan, ...] = ()
    #: Revert / hunk: the files asked for.
    paths: tuple[str, ...] = ()
    #: Rewind: files changed since the turn that no turn of the chat touched (left alone).
    kept: tuple[str, ...] = ()
    #: Rewind: files the turns changed outside the chat's folder (left alone).
    outside: tuple[str, ...] = ()
    #: Agents writing in that repository now (another chat, another Tolaria process).
    writers: tuple[str, ...] = ()
    #: The turn's after-state was recorded at a later start (it may hold the user's edits).
    late: bool = False
    #: Shown again: something changed after the user was asked.
    stale: bool = False
    fingerprint: str = ""
    #: Undo: what it undoes ("Revert of a.txt").
    label: str = ""

    @property
    def blocked(self) -> tuple[FilePlan, ...]:
        return tuple(f for f in self.files if f.blocker)

    @property
    def later(self) -> tuple[FilePlan, ...]:
        return tuple(f for f in self.files if f.later and not f.blocker)

    @property
    def needs_confirm(self) -> bool:
        return (self.kind == REWIND or self.late or bool(self.writers) or bool(self.later)
                or self.stale)

    def confirm_text(self) -> str:
        """The button that goes ahead ("" when blocked: nothing to confirm)."""
        if self.blocked:
            return ""
        if self.kind == UNDO:
            return "Undo anyway" if self.later else "Undo"
        if self.kind == REWIND:
            return "Rewind"
        if self.later and all(f.action == MERGE for f in self.later):
            return "Take out this turn's changes"
        return "Revert anyway" if (self.later or self.late or self.writers) else "Revert"

    def title(self) -> str:
        """The confirm's first line: the question (or that nothing can be done)."""
        if self.blocked:
            return "Nothing was changed: " + ("this cannot be undone" if self.kind == UNDO
                                             else "these files cannot be restored") + ":"
        if not self.files:
            return "Nothing to do: the files are already as they were before."
        if self.kind == REWIND:
            return "Rewind to before this turn?"
        if self.kind == UNDO:
            return f"Undo {self.label}?"
        names = self.paths or tuple(f.path for f in self.files)
        return f"Revert {names[0]}?" if len(names) == 1 else f"Revert {len(names)} files?"

    def lines(self) -> list[str]:
        """The plan in words, most important first (the confirm's text, the CLI's output)."""
        out: list[str] = []
        if self.stale:
            out.append("Files changed after you were asked: check again.")
        if self.blocked:
            out.append(self.title())
            out += [f"  • {f.line()}" for f in self.blocked]
            return out
        out += [f"Agent running in this repository: {w}" for w in self.writers]
        if self.late:
            out.append("This turn's changes were recorded after a restart: they may include "
                       "your own edits made while Tolaria was closed.")
        out.insert(0, self.title())
        later = [f for f in self.files if f.later]
        out += [f"  • {f.line()}" for f in later + [f for f in self.files if not f.later]]
        if self.kept:
            out.append(f"Left as they are (changed since, not by this chat's turns): "
                       f"{_names(self.kept)}")
        if self.outside:
            out.append(f"Left as they are (outside the chat's folder): {_names(self.outside)}")
        if self.files and self.kind != UNDO:
            out.append("A copy of the files as they are now is kept: Undo brings them back.")
        return out


def _names(paths: tuple[str, ...], most: int = 6) -> str:
    shown = ", ".join(paths[:most])
    return shown + (f" and {len(paths) - most} more" if len(paths) > most else "")


@dataclass(frozen=True)
class RestoreResult:
    """``done``: the files were written (``files``); else ``plan`` says why not / what to
    confirm."""

    done: bool
    plan: RestorePlan
    files: tuple[str, ...] = ()
