"""Agent settings, one import for the window and the CLI (Qt-free).

- per-agent overrides in ``settings.toml`` and how a run applies them: tolaria/agent_overrides.py
- custom agents (one manifest file each in the user adapters folder): tolaria/custom_agents.py
- the "Test" button (version probe + one tiny real turn): tolaria/agent_probe.py
"""

from __future__ import annotations

from tolaria.agent_overrides import (
    MASK,
    AgentOverrides,
    AgentSettingsError,
    PreparedRun,
    apply_overrides,
    is_secret_name,
    join_args,
    load_overrides,
    mask,
    prepare_run,
    run_options,
    save_overrides,
    split_args,
    validate_overrides,
)
from tolaria.agent_probe import TEST_PROMPT, TestResult, test_agent
from tolaria.custom_agents import (
    duplicate_agent,
    field_of,
    manifest_data,
    remove_custom_agent,
    reset_builtin,
    template_manifest,
    validate_manifest_fields,
    write_custom_agent,
)

__all__ = [
    "MASK", "TEST_PROMPT", "AgentOverrides", "AgentSettingsError", "PreparedRun", "TestResult",
    "apply_overrides", "duplicate_agent", "field_of", "is_secret_name", "join_args",
    "load_overrides",
    "manifest_data", "mask", "prepare_run", "remove_custom_agent", "reset_builtin",
    "run_options", "save_overrides", "split_args", "template_manifest", "test_agent", "validate_manifest_fields",
    "validate_overrides", "write_custom_agent",
]
