"""MCP servers the user lists once for every agent (issue 28): the model (``servers.py``)."""
