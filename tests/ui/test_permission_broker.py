"""The permission broker on a real bridge and the qasync loop: stale answers, closed streams."""

from __future__ import annotations

import asyncio

from pytestqt.qtbot import QtBot

from tolaria.core.permissions import PermissionChoice, PermissionRequest
from tolaria.core.stream_id import new_stream_id
from tolaria.qt.bridge import Bridge
from tolaria.qt.permissions import PermissionBroker, always_key

CHOICES = (PermissionChoice("ok", "Allow", "allow_once"),
           PermissionChoice("no", "Reject", "reject_once"))


def question(stream_id: str, kind: str = "execute", title: str = "ls") -> PermissionRequest:
    return PermissionRequest(stream_id, "t", title, {"command": title}, CHOICES, kind=kind)


def test_answers_only_open_questions_of_their_stream(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop) -> None:
    bridge = Bridge()
    broker = PermissionBroker(bridge)
    sid = new_stream_id()
    bridge.open_stream(sid)
    settled: list[tuple[str, str, str]] = []
    bridge.permission_settled.connect(lambda *args: settled.append(args))
    with qtbot.waitSignal(bridge.permission_requested) as shown:
        task = qloop.create_task(broker.ask(1, question(sid)))
    key = shown.args[1]
    assert broker.pending(sid) == [key]
    assert not broker.answer(new_stream_id(), key, "ok")  # not this stream's question
    assert broker.answer(sid, key, "no")
    assert not broker.answer(sid, key, "ok")  # answered once
    qtbot.waitUntil(task.done)
    assert task.result() == "no"
    assert settled == [(sid, key, "reject")]
    assert broker.remembered(1) == frozenset()


def test_a_finished_stream_closes_its_questions_and_asks_no_more(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop) -> None:
    bridge = Bridge()
    broker = PermissionBroker(bridge)
    sid = new_stream_id()
    bridge.open_stream(sid)
    with qtbot.waitSignal(bridge.permission_requested):
        task = qloop.create_task(broker.ask(1, question(sid)))
    with qtbot.waitSignal(bridge.permission_settled) as settled:
        broker.close_stream(sid)
    assert settled.args[2] == "cancelled"
    qtbot.waitUntil(task.done)
    assert task.result() is None and broker.pending() == []
    # A stream that is not open (stopping, over) is not asked at all.
    late = qloop.create_task(broker.ask(1, question(new_stream_id())))
    qtbot.waitUntil(late.done)
    assert late.result() is None


def test_always_is_keyed_by_kind_or_by_title_when_vague() -> None:
    sid = new_stream_id()
    assert always_key(question(sid, "execute", "ls")) == always_key(question(sid, "execute", "rm"))
    assert always_key(question(sid, "other", "ls")) != always_key(question(sid, "other", "rm"))
    assert always_key(question(sid, "", "ls")) == "title:ls"
