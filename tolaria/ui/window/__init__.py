"""The main window around the chats: menus, keys, command palette, bars, quit prompt and About."""
