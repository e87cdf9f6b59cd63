"""A tree that is another tree with some paths changed, writing only the trees along them.

``write-tree`` reads and hashes every entry of an index (100,000 files: most of a snapshot's
time); a turn changes a handful. Here the trees on the changed paths' way to the root are read
(one ``cat-file --batch``), edited, hashed here and written in one ``hash-object`` call, whose
object names must equal the ones computed (else CheckpointError: the caller takes the general
way). Entries are sorted as git sorts them (a folder as if its name ended in ``/``).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from tolaria.core.checkpoints.gitrun import Cancel, CheckpointError
from tolaria.core.checkpoints.store import Layout, store_git

TREE_MODE = b"40000"
#: path -> (mode, object id), or None to remove it.
Changes = dict[str, tuple[str, str] | None]


def edit(lay: Layout, base_tree: str, changes: Changes, cancel: Cancel | None = None) -> str:
    """The tree ``base_tree`` with ``changes`` applied (written into the store)."""
    if not changes:
        return base_tree
    if any("\n" in p or p.startswith("/") or p.endswith("/") or "//" in p for p in changes):
        raise CheckpointError("a path git's batch reader cannot name")
    folders: set[str] = {""}
    for path in changes:
        parts = path.split("/")
        for i in range(1, len(parts)):
            folders.add("/".join(parts[:i]))
    trees = _read_trees(lay, base_tree, sorted(folders), cancel)
    size = 32 if lay.object_format == "sha256" else 20
    by_folder: dict[str, dict[bytes, tuple[bytes, bytes] | None]] = {f: {} for f in folders}
    for path, value in changes.items():
        parent, _, leaf = path.rpartition("/")
        by_folder[parent][leaf.encode(errors="surrogateescape")] = None if value is None else (
            value[0].encode(), bytes.fromhex(value[1]))
    written: dict[str, bytes] = {}
    made: dict[str, bytes | None] = {}  # folder -> its new tree id (None: now empty)
    for folder in sorted(folders, key=lambda f: -f.count("/") if f else 1):
        entries = dict(trees.get(folder, {}))
        for name, edit_to in by_folder[folder].items():
            if edit_to is None:
                entries.pop(name, None)
            else:
                entries[name] = edit_to
        prefix = folder + "/" if folder else ""
        for child in (f for f in folders if f and f.rpartition("/")[0] == folder):
            name = child[len(prefix):].encode(errors="surrogateescape")
            sub = made[child]
            if name in by_folder[folder] and by_folder[folder][name] is not None:
                if sub is not None:
                    raise CheckpointError(f"{child} is both a file and a folder")
                continue
            if sub is None:
                entries.pop(name, None)
            else:
                entries[name] = (TREE_MODE, sub)
        if not entries and folder:
            made[folder] = None
            continue
        body = b"".join(mode + b" " + name + b"\0" + oid for name, (mode, oid) in
                        sorted(entries.items(), key=_order))
        oid = hashlib.new(lay.object_format, b"tree %d\0" % len(body) + body).digest()
        if len(oid) != size:
            raise CheckpointError("unexpected object id size")
        made[folder] = oid
        written[oid.hex()] = body
    root = made[""]
    assert root is not None
    _write(lay, written, cancel)
    return root.hex()


def _order(item: tuple[bytes, tuple[bytes, bytes]]) -> bytes:
    name, (mode, _oid) = item
    return name + b"/" if mode == TREE_MODE else name


def _read_trees(lay: Layout, base_tree: str, folders: list[str], cancel: Cancel | None
                ) -> dict[str, dict[bytes, tuple[bytes, bytes]]]:
    names = [base_tree if not f else f"{base_tree}:{f}" for f in folders]
    done = store_git(lay, "cat-file", "--batch", cancel=cancel,
                     stdin="".join(n + "\n" for n in names).encode(errors="surrogateescape"))
    out = done.stdout
    size = 32 if lay.object_format == "sha256" else 20
    found: dict[str, dict[bytes, tuple[bytes, bytes]]] = {}
    at = 0
    for folder in folders:
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        at = end + 1
        if header[-1] == b"missing" or len(header) != 3:
            continue  # a new folder, or a file there now (it becomes a folder)
        length = int(header[2])
        body = out[at:at + length]
        at += length + 1
        if header[1] != b"tree":
            continue
        entries: dict[bytes, tuple[bytes, bytes]] = {}
        pos = 0
        while pos < len(body):
            space = body.index(b" ", pos)
            nul = body.index(b"\0", space)
            entries[body[space + 1:nul]] = (body[pos:space], body[nul + 1:nul + 1 + size])
            pos = nul + 1 + size
        found[folder] = entries
    return found


def _write(lay: Layout, trees: dict[str, bytes], cancel: Cancel | None) -> None:
    if not trees:
        return
    with tempfile.TemporaryDirectory(prefix="tolaria-trees-") as tmp:
        files = []
        for oid, body in trees.items():
            target = Path(tmp) / oid
            target.write_bytes(body)
            files.append(str(target))
        done = store_git(lay, "hash-object", "-t", "tree", "-w", "--no-filters", "--stdin-paths",
                         stdin="".join(f + "\n" for f in files).encode(), cancel=cancel)
    got = done.stdout.decode().split()
    if got != list(trees):
        raise CheckpointError("git named the edited trees differently")
