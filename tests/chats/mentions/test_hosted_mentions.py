"""A turn of a chat whose folder is on a host (ADR 0035, "@-mentions on a host"): its
mentions are rewritten from the host's listing, its ACP resource links are the host's paths,
and nothing on this machine is read for them, even where the same path exists here."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from helpers import async_test

from tolaria.chats.engine import QuietObserver, TurnEngine
from tolaria.chats.mentions.cache import Indexed
from tolaria.chats.mentions.hosted import (
    HostedIndexCache,
    HostedMentions,
    hosted_where,
    shared_hosted,
    split_where,
)
from tolaria.chats.mentions.listing import Listing, folders_of
from tolaria.chats.mentions.matcher import MentionIndex
from tolaria.chats.run_config import prepare_run
from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import Store
from tolaria.core.turns.request import RunRequest
from tolaria.support.tasks import TaskSet


def listed(root: str, *files: str) -> Indexed:
    listing = Listing(root, files, folders_of(files), "git")
    return Indexed(listing, MentionIndex(listing.files, listing.folders), time.monotonic(), (1, 2))


def test_the_hosts_listing_decides_and_no_local_file_is_read(tmp_path: Path) -> None:
    # The same path exists here with other files: what is here must not count.
    (tmp_path / "here-only.py").write_text("x")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("here")
    there = HostedMentions(listed(str(tmp_path), "src/app.py", "docs/my notes.md"))
    adapters = load_adapters()
    codex = prepare_run(adapters.get("codex"), path=tmp_path / "none.toml")
    prompt = 'fix @src/app.py, read @"docs/my notes.md" and @here-only.py'
    assert codex.request(prompt, cwd=str(tmp_path), hosted=there).prompt == (
        'fix src/app.py, read "docs/my notes.md" and @here-only.py')
    acp = next(m for m in adapters.manifests.values() if m.protocol == "acp")
    request = prepare_run(acp, path=tmp_path / "none.toml").request(
        "see @src/app.py and @src/ and @here-only.py", cwd=str(tmp_path), hosted=there)
    # Links only for listed files (not the folder, not what is only here), as the host's paths.
    assert request.mention_links == (f"{tmp_path}/src/app.py",)


def test_nothing_listed_yet_keeps_the_prompt_as_typed(tmp_path: Path) -> None:
    (tmp_path / "src.py").write_text("x")
    codex = prepare_run(load_adapters().get("codex"), path=tmp_path / "none.toml")
    request = codex.request("fix @src.py", cwd=str(tmp_path), hosted=HostedMentions(None))
    assert request.prompt == "fix @src.py" and request.mention_links == ()


def test_a_where_is_never_a_local_folder_and_is_cached_per_host_and_folder() -> None:
    where = hosted_where("box", "/srv/app")
    assert split_where(where) == ("box", "/srv/app") and split_where("/srv/app") is None
    cache = HostedIndexCache(max_age_s=30)
    cache._keep(where, listed("/srv/app", "a.py"))
    assert cache.is_fresh(where) and cache.get(hosted_where("other", "/srv/app")) is None
    cache.invalidate(where)
    assert cache.get(where) is None


@async_test
async def test_the_engine_builds_a_remote_turn_from_the_hosts_listing(
        tolaria_home: Path, tmp_path: Path) -> None:
    (tolaria_home / "settings.toml").write_text('[hosts."box"]\ncommand = "env"\n')
    store = Store(tmp_path / "tolaria.sqlite3")
    engine = TurnEngine(store, ProcessRegistry(), QuietObserver(), TaskSet(),
                        adapters=load_adapters(), grace_s=1.0)
    folder = f"/srv/tolaria-test-{uuid.uuid4().hex[:8]}"  # not on this machine
    try:
        chat = engine.new_conversation("codex", str(tmp_path))
        assert engine.set_host(chat.id, "box", folder) is None
        moved = store.get_conversation(chat.id)
        assert moved is not None
        before = engine._request(engine.plan(moved, "fix @src/app.py"))
        assert isinstance(before, RunRequest) and before.prompt == "fix @src/app.py"
        shared_hosted()._keep(hosted_where("box", folder), listed(folder, "src/app.py"))
        after = engine._request(engine.plan(moved, "fix @src/app.py"))
        assert isinstance(after, RunRequest) and after.target is not None
        assert after.prompt == "fix src/app.py" and after.cwd == folder
    finally:
        shared_hosted().invalidate(hosted_where("box", folder))
        await engine.shutdown()
        store.close()
