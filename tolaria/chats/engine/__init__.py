"""One Qt-free turn engine for the window and ``tolaria run`` (docs/adr/0018-one-turn-engine.md).

- engine.py: ``TurnEngine``, a turn's life: plan, record, reserve, checkpoint, run, end; with
  its parts control.py (stop, stop all, restart, retry, after-finish, shutdown), queueing.py
  (queued messages),
  snapshots.py (checkpoints around a turn, their crash recovery) and chatting.py (create,
  rename, delete while running), leaving.py (kept remote runs let go at quit);
- gate.py: ``StreamGate``, which events of a run still reach the store and the front end;
- observer.py: ``TurnObserver``, the facts the front end hears.
"""

from __future__ import annotations

from tolaria.chats.engine.engine import TurnEngine
from tolaria.chats.engine.gate import StreamGate
from tolaria.chats.engine.observer import PermissionDesk, QuietObserver, TurnObserver

__all__ = ["PermissionDesk", "QuietObserver", "StreamGate", "TurnEngine", "TurnObserver"]
