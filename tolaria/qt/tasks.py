"""The window's name for the task set (tolaria/support/tasks.py), which the Qt-free turn engine
(tolaria/chats/engine/) uses too."""

from __future__ import annotations

from tolaria.support.tasks import TaskSet

__all__ = ["TaskSet"]
