"""A turn of a chat whose folder is on a host (ADR 0035, "@-mentions on a host"): its
mentions are rewritten from the host's listing, its ACP resource links are the host's paths,
and nothing on this machine is read for them, even where the same path exists here."""

from __future__ import annotations

import time
from pathlib import Path

from tolaria.chats.mentions.cache import Indexed
from tolaria.chats.mentions.hosted import (
    HostedIndexCache,
    HostedMentions,
    hosted_where,
    split_where,
)
from tolaria.chats.mentions.listing import Listing, folders_of
from tolaria.chats.mentions.matcher import MentionIndex
from tolaria.chats.run_config import prepare_run
from tolaria.core.adapters.manifest import load_adapters


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
