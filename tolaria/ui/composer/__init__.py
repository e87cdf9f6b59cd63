"""Where the user writes: the prompt editor, the queued messages above it, and the status line and
calm notices under it."""
