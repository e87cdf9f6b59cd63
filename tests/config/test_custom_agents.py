"""Custom agents in the user adapters folder: template, live validation, write (new, edit with
comments kept, rename), duplicate, remove, reset a built-in; then a real run of one."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import Collector, async_test

from tolaria.config.agents import (
    AgentOverrides,
    duplicate_agent,
    field_of,
    load_overrides,
    remove_custom_agent,
    reset_builtin,
    save_overrides,
    template_manifest,
    validate_manifest_fields,
    write_custom_agent,
)
from tolaria.core.adapters.manifest import PROTOCOLS, ManifestError, load_adapters, parse_manifest
from tolaria.core.events import STOP_END_TURN
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent
from tolaria.support import paths

ROOT = Path(__file__).resolve().parents[2]
REPORT_AGENT = ROOT / "tests" / "fakes" / "report_agent.py"


def custom(**changes: Any) -> dict[str, Any]:
    data = template_manifest()
    data.update(id="reporter", name="Reporter",
                command=[sys.executable, str(REPORT_AGENT), "--", "{prompt}"])
    data.update(changes)
    return data


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_every_template_is_a_valid_manifest_with_a_free_id(kind: str) -> None:
    data = template_manifest(kind)
    assert data["protocol"] == kind
    assert validate_manifest_fields(data) == []
    assert data["id"] not in load_adapters().manifests
    parse_manifest(data)


def test_template_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown protocol 'telnet'"):
        template_manifest("telnet")


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"id": "Bad Id"}, "id", "must be 1-64 characters of a-z, 0-9 and '-'"),
    ({"id": "demo"}, "id", "'demo' is already used by another agent"),
    ({"protocol": "smoke-signals"}, "protocol", "must be one of"),
    ({"command": []}, "command", "must be a non-empty list of strings"),
    ({"command": ["", "{prompt}"]}, "command", "command[0]: the program must not be empty"),
    ({"command": ["{prompt}"]}, "command", "the program cannot be the prompt"),
    ({"command": ["agent", "{prompt}", "--"]}, "command", "must come after the \"--\""),
    ({"command": ["agent", "{prompt}", "{prompt}"]}, "command", "only once"),
    ({"name": ""}, "name", "must be a non-empty string"),
    ({"stop": {"polite": "please"}}, "stop", "stop.polite: must be one of"),
    ({"model_args": ["--model"]}, "model_args", "{model} exactly once"),
])
def test_live_validation_names_the_field(change: dict[str, Any], field: str, message: str) -> None:
    problems = validate_manifest_fields(custom(**change), taken_ids={"demo"})
    assert any(f == field and message in m for f, m in problems), problems


def test_manifest_keys_map_to_form_fields() -> None:
    assert [field_of(k) for k in ("command[0]", "env.FOO", "stop.polite", "id", None)] == [
        "command", "env", "stop", "id", ""]


def test_write_a_new_agent_then_edit_it_keeping_comments_then_rename_it() -> None:
    path = write_custom_agent(custom())
    assert path == paths.user_adapters_dir() / "reporter.toml"
    assert path.stat().st_mode & 0o777 == 0o600
    loaded = load_adapters().get("reporter")
    assert (loaded.name, loaded.builtin, loaded.source) == ("Reporter", False, path)
    with pytest.raises(ManifestError, match="already used by another agent"):
        write_custom_agent(custom())
    path.write_text("# my notes about this agent\n" + path.read_text())
    write_custom_agent(custom(name="Reporter 2"), replace_id="reporter")
    assert "# my notes about this agent" in path.read_text()
    assert load_adapters().get("reporter").name == "Reporter 2"
    renamed = write_custom_agent(custom(id="reporter-b", name="Reporter B"), replace_id="reporter")
    assert renamed.name == "reporter-b.toml"
    assert not path.exists()
    assert "reporter" not in load_adapters().manifests


def test_an_invalid_agent_is_not_written() -> None:
    with pytest.raises(ManifestError) as caught:
        write_custom_agent(custom(command=["{prompt}"]))
    assert caught.value.key == "command[0]"
    assert not paths.user_adapters_dir().exists() or not any(paths.user_adapters_dir().iterdir())


def test_a_builtin_id_is_refused_for_a_new_agent() -> None:
    with pytest.raises(ManifestError, match="'demo' is already used by a built-in agent"):
        write_custom_agent(custom(id="demo"))


def test_duplicate_a_builtin_keeps_its_comments_and_works() -> None:
    demo = load_adapters().get("demo")
    path = duplicate_agent(demo, "demo-copy", "Demo copy")
    text = path.read_text()
    assert "# The built-in demo agent" in text
    copy = load_adapters().get("demo-copy")
    assert (copy.name, copy.command, copy.builtin) == ("Demo copy", demo.command, False)
    with pytest.raises(ManifestError, match="already used"):
        duplicate_agent(demo, "demo-copy", "Again")


def test_remove_a_custom_agent_and_refuse_a_builtin() -> None:
    write_custom_agent(custom())
    save_overrides("reporter", AgentOverrides(model="x"))
    remove_custom_agent("reporter")
    assert "reporter" not in load_adapters().manifests
    assert "reporter" not in load_overrides()[0]
    with pytest.raises(ValueError, match=r"Demo agent \(offline\) \(demo\) is a built-in agent "
                                         "and cannot be removed; disable it instead"):
        remove_custom_agent("demo")
    with pytest.raises(ValueError, match="no custom agent 'ghost'"):
        remove_custom_agent("ghost")


def test_remove_a_broken_custom_agent_file() -> None:
    folder = paths.user_adapters_dir()
    folder.mkdir(parents=True)
    (folder / "broken.toml").write_text("id = \n")
    assert any(e.path and e.path.stem == "broken" for e in load_adapters().errors)
    remove_custom_agent("broken")
    assert not (folder / "broken.toml").exists()


def test_reset_a_builtin_drops_overrides_and_a_shadowing_file() -> None:
    save_overrides("demo", AgentOverrides(enabled=False, model="m"))
    save_overrides("codex", AgentOverrides(model="o3"))
    folder = paths.user_adapters_dir()
    folder.mkdir(parents=True)
    (folder / "demo.toml").write_text('id = "demo"\nname = "My demo"\nprotocol = "lines"\n'
                                      'command = ["echo"]\n')
    assert load_adapters().get("demo").name == "My demo"
    reset_builtin("demo")
    demo = load_adapters().get("demo")
    assert (demo.builtin, demo.name) == (True, "Demo agent (offline)")
    assert load_overrides()[0] == {"codex": AgentOverrides(model="o3")}
    with pytest.raises(ValueError, match="not a built-in agent"):
        reset_builtin("reporter")


@async_test
async def test_a_custom_agent_runs() -> None:
    write_custom_agent(custom())
    manifest = load_adapters().get("reporter")
    collector = Collector()
    done = await stream_ai_agent(RunRequest(manifest=manifest, prompt="-x looks like a flag"),
                                 new_stream_id(), collector, registry=ProcessRegistry())
    assert done.stop_reason == STOP_END_TURN
    assert '"--", "-x looks like a flag"' in collector.text()


def test_manifest_data_rebuilds_every_builtin_exactly() -> None:
    from dataclasses import replace

    from tolaria.config.agents import manifest_data

    for manifest in load_adapters().manifests.values():
        detached = replace(manifest, source=None, builtin=False)
        assert parse_manifest(manifest_data(detached)) == detached, manifest.id
        assert manifest_data(manifest)["id"] == manifest.id  # from its file


@async_test
async def test_duplicate_of_a_manifest_without_a_file_runs(tmp_path: Path) -> None:
    from helpers import fake_manifest

    path = duplicate_agent(fake_manifest("normal"), "fake-copy", "Fake copy")
    copy = load_adapters().get("fake-copy")
    assert copy.source == path
    collector = Collector()
    done = await stream_ai_agent(RunRequest(manifest=copy, prompt="hi", cwd=str(tmp_path)),
                                 new_stream_id(), collector, registry=ProcessRegistry())
    assert done.stop_reason == STOP_END_TURN


def test_nothing_is_removed_while_the_settings_file_is_broken() -> None:
    from tolaria.config.settings import SettingsFileError, settings_path

    path = write_custom_agent(custom())
    settings_path().write_text("[agents.reporter\n")
    with pytest.raises(SettingsFileError, match=r"settings.toml:1: not valid TOML"):
        remove_custom_agent("reporter")
    assert path.exists()
