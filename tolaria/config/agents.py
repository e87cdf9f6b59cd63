"""Agent settings, one import for the window and the CLI (Qt-free).

- per-agent overrides in ``settings.toml`` and how a run applies them: tolaria/config/overrides.py
  (one run's options, ``prepare_run``: tolaria/chats/run_config.py)
- custom agents (one manifest file each in the user adapters folder): tolaria/config/custom_agents.py
- the "Test" button (version probe + one tiny real turn): tolaria/config/probe.py
"""

from __future__ import annotations

from tolaria.config.custom_agents import (
    duplicate_agent,
    field_of,
    manifest_data,
    remove_custom_agent,
    reset_builtin,
    template_manifest,
    validate_manifest_fields,
    write_custom_agent,
)
from tolaria.config.overrides import (
    MASK,
    AgentOverrides,
    AgentSettingsError,
    apply_overrides,
    is_secret_name,
    join_args,
    load_overrides,
    mask,
    save_overrides,
    split_args,
    validate_overrides,
)
from tolaria.config.probe import TEST_PROMPT, TestResult, test_agent

__all__ = [
    "MASK", "TEST_PROMPT", "AgentOverrides", "AgentSettingsError", "TestResult",
    "apply_overrides", "duplicate_agent", "field_of", "is_secret_name", "join_args",
    "load_overrides",
    "manifest_data", "mask", "remove_custom_agent", "reset_builtin",
    "save_overrides", "split_args", "template_manifest", "test_agent", "validate_manifest_fields",
    "validate_overrides", "write_custom_agent",
]
