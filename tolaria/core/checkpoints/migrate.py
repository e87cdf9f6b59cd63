"""Moving an earlier Tolaria's checkpoint refs out of the user's repository (ADR 0010).

Before 2026-12 checkpoints were ``refs/tolaria/...`` refs in the user's own repository, which a
``git push --mirror`` or a mirror clone carries (with whatever untracked file a checkpoint
held). On first use of a repository in a process they are moved into Tolaria's store:

1. the objects only those refs reach (``rev-list --objects`` of them, not of the user's other
   refs) are packed into the store's own object folder (``pack-objects``, in the store: no
   transport, nothing of the repository's runs);
2. the pack is verified to hold every one of them (its index, ``show-index``);
3. the refs are written into the store under the same names (one whose name the store already
   uses for another commit gets ``-legacy`` appended);
4. only then each is deleted from the user's repository, and only if it still names the commit
   that was copied (``update-ref -d REF OLD``).

Turn records name commits, not refs, so none needs rewriting. Every step can be repeated: an
interrupted move is finished by the next one, two processes moving at once write the same pack
(named by its content) and the same refs, and a ref deleted by the other is simply gone.
"""

from __future__ import annotations

import logging
import threading
from subprocess import CompletedProcess

from tolaria.core.checkpoints.gitrun import (
    Cancel,
    CheckpointCancelled,
    CheckpointError,
    in_user_repo,
    run,
    safe_env,
)
from tolaria.core.checkpoints.store import REF_PREFIX, Layout, legacy_refs

log = logging.getLogger(__name__)
_done: set[str] = set()
_lock = threading.Lock()


def migrate_once(lay: Layout, cancel: Cancel | None = None) -> None:
    """``migrate`` the first time a process uses this store; a failure is logged and left for
    the next process (the old refs stay readable where they are: ops.load). It runs before a
    turn's first snapshot, so a Stop (``cancel``) kills it like the snapshot's own git calls:
    CheckpointCancelled, and the next use of the store moves the rest."""
    with _lock:
        if str(lay.store) in _done:
            return
        _done.add(str(lay.store))
    try:
        migrate(lay, cancel)
    except CheckpointCancelled:
        with _lock:
            _done.discard(str(lay.store))
        raise
    except (CheckpointError, OSError, ValueError):
        log.exception("could not move an earlier Tolaria's checkpoints out of %s", lay.top)


def migrate(lay: Layout, cancel: Cancel | None = None) -> int:
    """Move the repository's ``refs/tolaria/*`` into the store; returns how many moved."""
    old = legacy_refs(lay.top)
    if not old:
        return 0
    shas = sorted({sha for _ref, sha in old})
    objects = _only_theirs(lay, shas, cancel)
    if objects:
        _pack(lay, objects, cancel)
    names = _store_names(lay, old, cancel)
    updates = "".join(f"update {name} {sha}\n" for (_ref, sha), name in zip(old, names,
                                                                             strict=True))
    _store(lay, "update-ref", "--stdin", stdin=updates.encode(errors="surrogateescape"),
           cancel=cancel)
    moved = 0
    for ref, sha in old:
        done = in_user_repo(lay.top, "update-ref", "-d", ref, sha, check=False, cancel=cancel)
        moved += done.returncode == 0
    return moved


def _only_theirs(lay: Layout, shas: list[str], cancel: Cancel | None = None) -> list[str]:
    """Every object the old refs reach that the user's own refs do not."""
    done = in_user_repo(lay.top, "rev-list", "--objects", "--no-object-names", *shas, "--not",
                        f"--exclude={REF_PREFIX}*", "--all", cancel=cancel)
    return [line for line in done.stdout.decode().split() if line]


def _pack(lay: Layout, objects: list[str], cancel: Cancel | None = None) -> None:
    """Pack ``objects`` into the store's own object folder and check the pack holds them all."""
    pack_dir = lay.store / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    # No delta search (--window=0): an old checkpoint may hold a 300 MB untracked file, and
    # this runs before a turn's first snapshot.
    done = _store(lay, "pack-objects", "-q", "--window=0", str(pack_dir / "pack"),
                  stdin="".join(o + "\n" for o in objects).encode(), cancel=cancel)
    name = done.stdout.decode().strip()
    index = pack_dir / f"pack-{name}.idx"
    listed = run(["show-index", f"--object-format={lay.object_format}"], env=safe_env(),
                 stdin=index.read_bytes(), cancel=cancel)
    held = {line.split()[1] for line in listed.stdout.decode().splitlines() if line.strip()}
    missing = set(objects) - held
    if missing:
        raise CheckpointError(f"the copied checkpoints lack {len(missing)} objects: the old "
                              "refs were left where they are")


def _store_names(lay: Layout, old: list[tuple[str, str]], cancel: Cancel | None) -> list[str]:
    """The store's name for each old ref: the same, unless the store uses it for another
    commit."""
    done = _store(lay, "for-each-ref", "--format=%(refname) %(objectname)", REF_PREFIX,
                  cancel=cancel)
    have = dict(line.split(" ", 1) for line in done.stdout.decode(
        errors="surrogateescape").splitlines() if " " in line)
    return [ref if have.get(ref, sha) == sha else f"{ref}-legacy" for ref, sha in old]


def _store(lay: Layout, *args: str, stdin: bytes | None = None,
           cancel: Cancel | None = None) -> CompletedProcess[bytes]:
    return run(["--git-dir", str(lay.store), *args], env=safe_env(), stdin=stdin, cancel=cancel)
