"""Agent Client Protocol turns: the SDK client, session/update mapping, kept ACP processes."""
