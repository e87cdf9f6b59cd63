"""What the desktop is told about chats the user is not looking at (issue 27 item 2, ADR 0030).

Qt-free decisions: ``notices`` (what a notification says and offers), ``book`` (what to notify,
never twice, never for the chat in view, one on screen per chat, a question answered once) and
``stall`` (a run silent for N minutes). Sending them is tolaria/qt/notify/.
"""
