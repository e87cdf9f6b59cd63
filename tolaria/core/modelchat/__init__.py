"""Direct model chats (OpenAI-compatible HTTP): client, tool loop, keys, saved histories."""
