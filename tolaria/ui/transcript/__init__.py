"""The transcript of one conversation: its turns, their blocks and cards, and Find in the chat."""
