"""Reviewing a turn's file hunk by hunk (tolaria/chats/review.py) on a real repository and a real
store: the turn's own diff, Accept as a marker, Revert of one hunk, the clear refusal when the
file changed since, binary files, files the turn did not change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import async_test, git_repo

from tolaria.chats.checkpoints import TurnCheckpoints
from tolaria.chats.review import (
    ACCEPT,
    MARKER_HUNK_ACCEPTED,
    REVERT,
    ReviewRequest,
    TurnReview,
    hunk_key,
)
from tolaria.core.checkpoints import CheckpointError
from tolaria.core.store.db import Store

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

LINES = [f"line {n}\n" for n in range(1, 31)]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "proj", {"f.txt": "".join(LINES), "gone.txt": "bye\n"})


def changed(**lines: str) -> str:
    out = list(LINES)
    for key, text in lines.items():
        out[int(key[1:]) - 1] = text + "\n"
    return "".join(out)


@async_test
async def test_accept_and_revert_one_hunk_of_a_turn(store: Store, repo: Path) -> None:
    service = TurnCheckpoints(store)
    review = TurnReview(service)
    chat = store.create_conversation("c", "demo", str(repo))
    turn = store.start_turn(chat.id, "ai-agent-stream-r1", "demo", "edit").id
    await service.before_turn(chat, turn, str(repo))
    (repo / "f.txt").write_text(changed(l2="two", l25="twenty-five"))
    (repo / "pic.bin").write_bytes(bytes(range(256)))
    (repo / "gone.txt").unlink()
    await service.after_turn(chat, turn)
    (repo / "later.txt").write_text("after the turn: not in its diff\n")

    shown = await review.handle(chat.id, ReviewRequest(turn, "f.txt"))
    assert len(shown.hunks) == 2 and not shown.accepted and not shown.reverted
    first, second = (hunk_key(h) for h in shown.hunks)
    assert "+two" in shown.hunks[0].body and "+twenty-five" in shown.hunks[1].body

    accepted = await review.handle(chat.id, ReviewRequest(turn, "f.txt", ACCEPT, first))
    assert accepted.accepted == {first}
    assert (repo / "f.txt").read_text() == changed(l2="two", l25="twenty-five")
    [marker] = store.markers(chat.id, MARKER_HUNK_ACCEPTED)
    assert marker.turn_id == turn and marker.data == {"path": "f.txt", "hunk": first}

    reverted = await review.handle(chat.id, ReviewRequest(turn, "f.txt", REVERT, second))
    assert reverted.reverted == {second} and not reverted.error
    assert (repo / "f.txt").read_text() == changed(l2="two")
    again = await review.handle(chat.id, ReviewRequest(turn, "f.txt"))
    assert [hunk_key(h) for h in again.hunks] == [first, second], "the turn's diff stays put"

    (repo / "f.txt").write_text(changed(l2="the user's two"))
    refused = await review.handle(chat.id, ReviewRequest(turn, "f.txt", REVERT, first))
    assert refused.failed == first
    assert refused.error == ("f.txt has changed since this turn: that part no longer applies. "
                             "\"Revert whole file…\" first shows what it would do to the later "
                             "edits.")
    assert (repo / "f.txt").read_text() == changed(l2="the user's two"), "nothing written"

    # The turn deleted gone.txt: reverting its one hunk brings it back.
    [gone] = (await review.handle(chat.id, ReviewRequest(turn, "gone.txt"))).hunks
    await review.handle(chat.id, ReviewRequest(turn, "gone.txt", REVERT, hunk_key(gone)))
    assert (repo / "gone.txt").read_text() == "bye\n"

    binary = await review.handle(chat.id, ReviewRequest(turn, "pic.bin"))
    assert binary.binary and not binary.hunks
    with pytest.raises(CheckpointError, match=r"later\.txt is not a file this turn changed"):
        await review.handle(chat.id, ReviewRequest(turn, "later.txt"))
    with pytest.raises(CheckpointError, match="not in this turn's diff"):
        await review.handle(chat.id, ReviewRequest(turn, "f.txt", ACCEPT, "0" * 16))
    with pytest.raises(ValueError, match="not a review action: 'keep'"):
        ReviewRequest(turn, "f.txt", "keep")
