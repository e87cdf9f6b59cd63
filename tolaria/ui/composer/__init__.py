"""Where the user writes: the prompt editor, queued messages above it, status and notices below."""
