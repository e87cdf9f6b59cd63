"""User configuration: settings.toml, per-agent overrides, custom agents, the agent test probe."""
