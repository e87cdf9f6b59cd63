"""The conversation store (SQLite): chats, turns, events, markers."""
