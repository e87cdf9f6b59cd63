"""Agent manifests (adapters/*.toml): parsing and validation."""
