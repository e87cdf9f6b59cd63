"""The main window around the chats: its menus, keys and command palette, the bars over the chat,
the quit prompt and About."""
