"""A queued message is delivered in the store transaction that starts its turn (issue 22 item
9): ``Store.start_turn(delivering=...)`` records the turn, removes the messages from the queue
and writes the ``messages_delivered`` marker at once, so no crash or failed write can leave the
turn started with its messages still queued (shown again, sent twice) or the messages gone
without a turn (lost)."""

from __future__ import annotations

import signal
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from helpers import python_child, sigkill

from tolaria.core.store.db import MARKER_MESSAGES_DELIVERED, Store

SID = "ai-agent-stream-delivery0001"


def texts(store: Store, conversation_id: int) -> list[str]:
    return [m.text for m in store.queued(conversation_id)]


def test_the_turn_takes_its_messages_and_records_them(store: Store) -> None:
    conv = store.create_conversation("c", "demo", None)
    a, b, c = (store.queue_add(conv.id, t) for t in ("first", "second", "stays"))
    assert a is not None and b is not None and c is not None
    turn = store.start_turn(conv.id, SID, "demo", "first\n\nsecond", delivering=[a.id, b.id])
    assert texts(store, conv.id) == ["stays"]
    [marker] = store.markers(conv.id, MARKER_MESSAGES_DELIVERED)
    assert marker.turn_id == turn.id
    assert marker.data == {"ids": [a.id, b.id], "messages": ["first", "second"]}
    # Without messages to deliver nothing else is written.
    store.start_turn(conv.id, SID + "b", "demo", "typed")
    assert len(store.markers(conv.id, MARKER_MESSAGES_DELIVERED)) == 1


@pytest.mark.parametrize("refused", ["queue", "marker"])
def test_a_failed_second_write_leaves_neither_turn_nor_delivery(db: Path, refused: str) -> None:
    """The turn's row is written first; when removing the messages (or writing the marker)
    fails, the turn's row goes too and the messages stay queued."""
    with closing(Store(db)) as store:
        conv = store.create_conversation("c", "demo", None)
        message = store.queue_add(conv.id, "send me once")
        assert message is not None
        with closing(sqlite3.connect(db)) as other:  # another connection, as a real disk fault
            table, event = (("queued_messages", "DELETE") if refused == "queue"
                            else ("markers", "INSERT"))
            other.execute(f"CREATE TRIGGER refuse BEFORE {event} ON {table}"
                          " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
            other.commit()
        with pytest.raises(sqlite3.IntegrityError, match="refused by the test"):
            store.start_turn(conv.id, SID, "demo", "send me once", delivering=[message.id])
        assert store.turn_by_stream(SID) is None
        assert store.turns(conv.id) == []
        assert texts(store, conv.id) == ["send me once"]
        assert store.markers(conv.id, MARKER_MESSAGES_DELIVERED) == []
        assert SID not in store._live


#: Starts a turn delivering one queued message and is SIGKILLed inside that transaction: after
#: the turn's row, the queue's delete and the marker were written, before the commit. With
#: ``after``, it commits and is killed right after.
CHILD = r"""
import sys, time
from pathlib import Path
from tolaria.core.store.db import Store

where = sys.argv[2]
store = Store(Path(sys.argv[1]), flush_interval=3600)
conversation = store.create_conversation("crash", "fake", None)
message = store.queue_add(conversation.id, "typed while the turn ran")
print(conversation.id, flush=True)

def pause():
    print("inside", flush=True)
    time.sleep(300)

if where == "inside":
    store._conn.create_function("tolaria_test_pause", 0, pause)
    store._conn.execute("CREATE TEMP TRIGGER pause_here AFTER INSERT ON main.markers"
                        " BEGIN SELECT tolaria_test_pause(); END")
store.start_turn(conversation.id, "ai-agent-stream-crashdelivery", "fake",
                 message.text, delivering=[message.id])
print("after", flush=True)
time.sleep(300)
"""


@pytest.mark.parametrize("where", ["inside", "after"])
def test_a_sigkill_around_the_delivery_never_shows_the_message_twice(db: Path,
                                                                      where: str) -> None:
    with python_child(CHILD, str(db), where) as proc:
        assert proc.stdout is not None
        conversation_id = proc.stdout.readline()
        said = proc.stdout.readline().strip()
        assert said == where, f"child said {said!r}: {proc.communicate()[1]}"
        sigkill(proc)
    assert proc.returncode == -signal.SIGKILL
    with closing(Store(db)) as store:
        chat = int(conversation_id)
        turns = store.turns(chat)
        delivered = store.markers(chat, MARKER_MESSAGES_DELIVERED)
        if where == "inside":  # killed before the commit: as if never sent, nothing lost
            assert turns == [] and delivered == []
            assert texts(store, chat) == ["typed while the turn ran"]
        else:  # committed: the turn (left running, now interrupted) took the message
            assert [t.prompt for t in turns] == ["typed while the turn ran"]
            assert turns[0].status == "interrupted"
            assert texts(store, chat) == []
            assert [m.turn_id for m in delivered] == [turns[0].id]
