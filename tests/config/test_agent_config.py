"""Per-agent settings: stored in settings.toml, applied to real runs (the window's and
``tolaria run``'s), the Test button, custom agents, secrets kept out of sight."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes.fake_openai_server import FakeOpenAIServer, text_reply
from helpers import Collector, async_test, cli_env
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from redact_cases import PLAIN_NAMES, SECRET_NAMES

from tolaria.chats.run_config import prepare_run
from tolaria.config.agents import (
    MASK,
    AgentOverrides,
    AgentSettingsError,
    apply_overrides,
    is_secret_name,
    load_overrides,
    mask,
    save_overrides,
    test_agent,
    validate_overrides,
)
from tolaria.config.settings import Settings, SettingsFileError, load_settings, settings_path
from tolaria.core.adapters.manifest import (
    Manifest,
    ManifestError,
    StopPolicy,
    load_adapters,
    load_manifest_file,
    parse_manifest,
)
from tolaria.core.events import STOP_END_TURN
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent
from tolaria.support import paths, redact

ROOT = Path(__file__).resolve().parents[2]
REPORT_AGENT = ROOT / "tests" / "fakes" / "report_agent.py"


def report_manifest(**changes: Any) -> Manifest:
    """A "lines" agent that prints its argv, folder and chosen environment as JSON."""
    manifest = Manifest(id="report", name="Report agent", protocol="lines",
                        command=(sys.executable, str(REPORT_AGENT), "--", "{prompt}"),
                        model_args=("--model", "{model}"))
    return replace(manifest, **changes)


async def run_and_report(manifest: Manifest, **request: Any) -> dict[str, Any]:
    collector = Collector()
    done = await stream_ai_agent(RunRequest(manifest=manifest, prompt="hello there", **request),
                                 new_stream_id(), collector, registry=ProcessRegistry(),
                                 grace_s=0.5)
    assert done.stop_reason == STOP_END_TURN, collector.events
    report: dict[str, Any] = json.loads(collector.text().strip().splitlines()[0])
    return report


# -- storage ------------------------------------------------------------------------------------

def test_overrides_round_trip_and_reset() -> None:
    o = AgentOverrides(enabled=False, path="/opt/claude/bin/claude", extra_args=("--debug", "x y"),
                       env={"HTTPS_PROXY": "http://127.0.0.1:3128", "MY_TOKEN": "${TOKEN}"},
                       model="sonnet", permission_mode="full", cwd="~/src")
    save_overrides("claude", o)
    save_overrides("codex", AgentOverrides(model="o3"))
    loaded, problems = load_overrides()
    assert problems == []
    assert loaded == {"claude": o, "codex": AgentOverrides(model="o3")}
    text = settings_path().read_text()
    assert "[agents.claude]" in text and "[agents.claude.env]" in text
    save_overrides("claude", None)
    assert load_overrides()[0] == {"codex": AgentOverrides(model="o3")}
    save_overrides("codex", AgentOverrides())  # all defaults: same as a reset
    assert load_overrides() == ({}, [])
    assert "agents" not in settings_path().read_text()


def test_saving_overrides_keeps_comments_and_other_settings() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent("""\
        [behaviour]
        grace_seconds = 3  # slow machine

        # Claude behind the company proxy
        [agents.claude]
        extra_args = ["--verbose"]  # keep
        mystery = 1

        [agents.claude.env]
        HTTPS_PROXY = "http://proxy:3128"
        """))
    loaded, problems = load_overrides()
    assert any(":7: agents.claude.mystery: unknown key" in p for p in problems)
    save_overrides("claude", replace(loaded["claude"], model="opus",
                                     env={"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "x"}))
    text = path.read_text()
    for kept in ("grace_seconds = 3  # slow machine", "# Claude behind the company proxy",
                 'extra_args = ["--verbose"]  # keep', "mystery = 1",
                 'HTTPS_PROXY = "http://proxy:3128"'):
        assert kept in text
    again = load_overrides()[0]["claude"]
    assert again.model == "opus"
    assert dict(again.env) == {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "x"}


def test_invalid_overrides_are_refused_with_their_message_and_nothing_is_saved() -> None:
    save_overrides("claude", AgentOverrides(model="sonnet"))
    before = settings_path().read_bytes()
    cases = [
        (AgentOverrides(env={"1BAD": "x"}), "env", "is not a valid environment variable name"),
        (AgentOverrides(permission_mode="yolo"), "permission_mode", "must be one of safe, full"),
        (AgentOverrides(extra_args=("{prompt}",)), "extra_args", "must not contain {prompt}"),
        (AgentOverrides(model="{prompt}"), "model", "is not a model name"),
        (AgentOverrides(path="  "), "path", "not empty"),
    ]
    for o, field, message in cases:
        problems = validate_overrides(o)
        assert any(f == field and message in m for f, m in problems), (o, problems)
        with pytest.raises(AgentSettingsError, match=field):
            save_overrides("claude", o)
        assert settings_path().read_bytes() == before


def test_live_validation_checks_files_folders_and_the_manifest(tmp_path: Path) -> None:
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\n")
    assert validate_overrides(AgentOverrides(path=str(tmp_path / "nope"))) == [
        ("path", f"{tmp_path / 'nope'}: no such file")]
    assert validate_overrides(AgentOverrides(path=str(plain))) == [
        ("path", f"{plain}: not executable (chmod +x it)")]
    assert validate_overrides(AgentOverrides(path="claude")) == []  # looked up like the manifest's
    assert validate_overrides(AgentOverrides(cwd=str(tmp_path / "gone"))) == [
        ("cwd", f"{tmp_path / 'gone'}: no such folder")]
    no_model = report_manifest(model_args=())
    assert validate_overrides(AgentOverrides(model="x"), no_model)[0][0] == "model"
    with pytest.raises(AgentSettingsError, match="has no model_args"):
        apply_overrides(no_model, AgentOverrides(model="x"))


def test_a_broken_settings_file_is_not_saved_over() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = b"[agents.claude\nmodel = 'x'\n"
    path.write_bytes(raw)
    loaded, problems = load_overrides()
    assert loaded == {}
    assert problems[0].startswith(f"{path}:1: not valid TOML")
    with pytest.raises(SettingsFileError) as caught:
        save_overrides("claude", AgentOverrides(model="y"))
    assert caught.value.line == 1
    assert path.read_bytes() == raw


def test_bad_values_in_the_file_fall_back_and_are_named() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[agents.claude]\nmodel = "opus"\npermission_mode = "everything"\n')
    loaded, problems = load_overrides()
    assert loaded["claude"] == AgentOverrides(model="opus")
    assert problems == [f"{path}:3: agents.claude.permission_mode: must be one of safe, full, "
                        "got 'everything'; using the agent's default"]


@pytest.mark.parametrize("text", [
    'agents.claude.model = "a"\n',
    'agents = { claude = { model = "a" } }\n',
    '[agents]\nclaude = { model = "a", env = { X = "1" } }\n',
    '[agents]\nclaude.model = "a"\n',
    '[agents.claude]\nenv.X = "1"\n',
    'behaviour.grace_seconds = 1\n[agents.claude]\nmodel = "a"\n',
])
def test_hand_written_layouts_are_edited_faithfully_or_not_at_all(text: str) -> None:
    """Dotted keys and inline tables: the edit either means exactly what was asked, or the
    file is left byte for byte and the error says why."""
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    for agent, o in (("claude", AgentOverrides(model="b", env={"Y": "2"}, extra_args=("-v",))),
                     ("codex", AgentOverrides(model="c")), ("claude", None)):
        before = path.read_bytes()
        expected = {**load_overrides()[0]}
        if o is None:
            expected.pop(agent, None)
        else:
            expected[agent] = o
        try:
            save_overrides(agent, o)
        except SettingsFileError as exc:
            assert "cannot be edited by the app" in str(exc)  # noqa: PT017
            assert path.read_bytes() == before
            break
        assert load_overrides() == (expected, [])
    if "grace_seconds" in text:
        assert load_settings()[0].grace_seconds == 1.0


# -- applying to real runs --------------------------------------------------------------------------

@async_test
async def test_overrides_reach_a_real_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SETTINGS_TEST_SECRET", "s3cret")
    o = AgentOverrides(extra_args=("--flag", "two words"), model="big-model",
                       env={"REPORT_ENV": "API_TOKEN,PLAIN", "API_TOKEN": "${SETTINGS_TEST_SECRET}",
                            "PLAIN": "plain value"},
                       permission_mode="full", cwd=str(tmp_path))
    manifest = report_manifest(permission_args={"safe": ("--read-only",), "full": ("--yolo",)})
    prepared = prepare_run(manifest, settings=Settings(), overrides={"report": o})
    assert prepared.cwd == str(tmp_path)
    assert prepared.manifest.permissions == "full"
    request = prepared.request("p")
    assert (request.permission_mode, request.model, request.cwd) == ("full", "big-model",
                                                                     str(tmp_path))
    report = await run_and_report(prepared.manifest, cwd=prepared.cwd,
                                  permission_mode=prepared.permission_mode, model=prepared.model)
    # Added arguments go before the command's "--"; the prompt stays one argument after it.
    assert report["argv"][1:] == ["--model", "big-model", "--flag", "two words", "--yolo", "--",
                                  "hello there"]
    # Without the override, the manifest's default mode.
    default = prepare_run(manifest, settings=Settings(), overrides={})
    assert (default.permission_mode, default.model) == (None, None)
    assert "--read-only" in (await run_and_report(default.manifest))["argv"]
    assert report["env"] == {"API_TOKEN": "s3cret", "PLAIN": "plain value"}
    assert report["cwd"] == str(tmp_path)


@async_test
async def test_path_override_runs_another_program(tmp_path: Path) -> None:
    program = tmp_path / "my-claude"
    program.write_text(f"#!{sys.executable}\n" + REPORT_AGENT.read_text())
    program.chmod(0o755)
    manifest = report_manifest(command=("no-such-agent-program", "{prompt}"),
                               version_command=("no-such-agent-program", "--version"))
    applied = apply_overrides(manifest, AgentOverrides(path=str(program)))
    assert applied.command == (str(program), "{prompt}")
    assert applied.version_command == (str(program), "--version")
    report = await run_and_report(applied)
    assert report["argv"] == [str(program), "hello there"]


def test_behaviour_settings_reach_the_run() -> None:
    manifest = report_manifest(stop=StopPolicy(polite="sigint", polite_window_ms=1500))
    prepared = prepare_run(manifest, settings=Settings(polite_window_ms=200, grace_seconds=4.5),
                           overrides={})
    assert prepared.manifest.stop == StopPolicy(polite="sigint", polite_window_ms=200)
    assert prepared.grace_s == 4.5
    assert prepare_run(manifest, settings=Settings(retry_limit_seconds=0),
                       overrides={}).retry_limit_s == 0
    untouched = prepare_run(manifest, settings=Settings(), overrides={})
    assert untouched.manifest == manifest


def test_model_of_a_model_endpoint_replaces_its_model() -> None:
    chat = parse_manifest({"id": "local", "name": "Local", "protocol": "openai-chat",
                           "base_url": "http://127.0.0.1:9/v1", "model": "small"})
    applied = apply_overrides(chat, AgentOverrides(model="large", env={"X": "1"}))
    assert (applied.model, applied.env) == ("large", {"X": "1"})
    options = prepare_run(chat, settings=Settings(), overrides={"local": AgentOverrides()})
    assert (options.model, options.request("p").model) == (None, None)
    with pytest.raises(AgentSettingsError, match="model endpoint"):
        apply_overrides(chat, AgentOverrides(extra_args=("-v",)))


def test_prepare_run_refuses_a_disabled_agent_and_bad_settings() -> None:
    save_overrides("report", AgentOverrides(enabled=False))
    with pytest.raises(AgentSettingsError, match="agent report is disabled in settings"):
        prepare_run(report_manifest())
    path = settings_path()
    path.write_text('[agents.report]\nextra_args = "--not-a-list"\n')
    with pytest.raises(AgentSettingsError, match=r"agent report has invalid settings.*extra_args"):
        prepare_run(report_manifest())
    # Another agent's bad settings only warn.
    path.write_text('[agents.other]\nextra_args = "--not-a-list"\n')
    prepared = prepare_run(report_manifest())
    assert any("agents.other.extra_args" in w for w in prepared.warnings)


def test_manifest_model_args_are_validated() -> None:
    base = {"id": "x", "protocol": "lines", "command": ["x"]}
    assert parse_manifest({**base, "model_args": ["-m", "{model}"]}).model_args == ("-m",
                                                                                    "{model}")
    assert parse_manifest({**base, "model_args": ["--model={model}"]}).model_args
    for bad, reason in ((["--model"], "exactly once"), ("--model {model}", "list of strings"),
                        (["{model}", "{prompt}"], "must not contain {prompt}")):
        with pytest.raises(ManifestError, match=reason) as caught:
            parse_manifest({**base, "model_args": bad})
        assert caught.value.key == "model_args"


# -- secrets ----------------------------------------------------------------------------------------

def test_secret_names_and_masking() -> None:
    # Preferences hides what every other consumer masks: one rule (tests/redact_cases.py).
    assert is_secret_name is redact.is_secret_name
    for name in SECRET_NAMES:
        assert is_secret_name(name), name
    for name in PLAIN_NAMES:
        assert not is_secret_name(name), name
    assert mask("sk-live-1234567890abcdef") == MASK
    assert mask("${OPENAI_API_KEY}") == "${OPENAI_API_KEY}"
    assert mask("") == ""
    o = AgentOverrides(env={"OPENAI_API_KEY": "sk-live-1234567890abcdef", "LANG": "C"})
    assert "sk-live" not in repr(o)
    assert "'LANG': 'C'" in repr(o)


# -- the Test button --------------------------------------------------------------------------------

@async_test
async def test_test_agent_with_the_demo_agent(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_DELAY", "0")
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0.1")
    demo = load_adapters().get("demo")
    result = await test_agent(demo, AgentOverrides(), str(tmp_path), timeout=60,
                              registry=ProcessRegistry())
    assert result.ok, result
    assert result.version and "0.1.0" in result.version
    assert result.message == f"{demo.name} answered"
    assert result.detail


@async_test
async def test_test_agent_names_a_missing_program_and_its_install_hint(tmp_path: Path) -> None:
    manifest = report_manifest(command=("tolaria-no-such-agent", "{prompt}"),
                               install_hint="npm install -g no-such-agent")
    result = await test_agent(manifest, AgentOverrides(), str(tmp_path), timeout=10,
                              registry=ProcessRegistry())
    assert not result.ok
    assert result.message == "Report agent is not installed"
    assert "tolaria-no-such-agent" in result.detail
    assert "install with: npm install -g no-such-agent" in result.detail


@async_test
async def test_test_agent_shows_the_exact_error(tmp_path: Path) -> None:
    o = AgentOverrides(env={"REPORT_EXIT": "3"})
    result = await test_agent(report_manifest(), o, str(tmp_path), timeout=30,
                              registry=ProcessRegistry())
    assert not result.ok
    assert result.message == "Report agent exited with code 3"
    assert "report agent: failing on purpose with code 3" in result.detail


@async_test
async def test_test_agent_stops_an_agent_that_never_answers(tmp_path: Path) -> None:
    hang = Manifest(id="hang", name="Hanging agent", protocol="lines",
                    command=(sys.executable, "-c", "import time; time.sleep(60)"))
    result = await test_agent(hang, AgentOverrides(), str(tmp_path), timeout=1,
                              registry=ProcessRegistry(), grace_s=0.2)
    assert not result.ok
    assert result.message == "no answer within 1 s; the test run was stopped"


@async_test
async def test_test_agent_with_a_model_endpoint_uses_the_model_override(tmp_path: Path) -> None:
    server = FakeOpenAIServer().start()
    try:
        chat = parse_manifest({"id": "local", "name": "Local model", "protocol": "openai-chat",
                               "base_url": server.base_url, "model": "small"})
        server.script(text_reply("OK"))
        result = await test_agent(chat, AgentOverrides(model="large"), str(tmp_path), timeout=30,
                                  registry=ProcessRegistry())
        assert result.ok, result
        assert (result.message, result.detail) == ("Local model answered", "OK")
        assert server.requests[-1].body["model"] == "large"
        # No scripted reply: the server answers 500; its error text is what the user sees.
        failed = await test_agent(chat, AgentOverrides(), str(tmp_path), timeout=30,
                                  registry=ProcessRegistry())
        assert not failed.ok
        assert "no scripted reply" in failed.detail
        assert failed.message in failed.detail
    finally:
        server.stop()


# -- `tolaria run` reads the same files --------------------------------------------------------------

def _cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    import subprocess

    # The run's folder is a plain one in the test's home, never this checkout (a turn there
    # would checkpoint the checkout).
    folder = Path(env["TOLARIA_HOME"]) / "work"
    folder.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "tolaria", *args], env=env, cwd=folder,
                          capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _cli_env() -> dict[str, str]:
    return cli_env(Path(os.environ["TOLARIA_HOME"]))


def test_cli_refuses_a_disabled_agent() -> None:
    save_overrides("demo", AgentOverrides(enabled=False))
    code, out, err = _cli("run", "--agent", "demo", "hi", env=_cli_env())
    assert code == 2
    assert out == ""
    assert "tolaria: agent demo is disabled in settings" in err


def test_cli_applies_the_agent_overrides() -> None:
    adapters = paths.user_adapters_dir()
    adapters.mkdir(parents=True, exist_ok=True)
    (adapters / "report.toml").write_text(textwrap.dedent(f"""\
        id = "report"
        name = "Report agent"
        protocol = "lines"
        command = [{json.dumps(sys.executable)}, {json.dumps(str(REPORT_AGENT))}, "--", "{{prompt}}"]
        model_args = ["--model={{model}}"]
        """))
    save_overrides("report", AgentOverrides(extra_args=("--extra",), model="m1",
                                            env={"REPORT_ENV": "FROM_SETTINGS",
                                                 "FROM_SETTINGS": "yes"}))
    code, out, err = _cli("run", "--agent", "report", "--json", "hi", env=_cli_env())
    assert code == 0, err
    texts = [e["text"] for e in map(json.loads, out.splitlines()) if e["kind"] == "text_delta"]
    report = json.loads("".join(texts).splitlines()[0])
    assert report["argv"][1:] == ["--model=m1", "--extra", "--", "hi"]
    assert report["env"] == {"FROM_SETTINGS": "yes"}


def test_loaded_user_manifest_keeps_model_args(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text('id = "x"\nprotocol = "lines"\ncommand = ["x"]\n'
                    'model_args = ["--model", "{model}"]\n')
    assert load_manifest_file(path).model_args == ("--model", "{model}")


def test_arguments_typed_on_one_line() -> None:
    from tolaria.config.agents import join_args, split_args

    assert split_args('--flag "two words" one\\ arg') == ("--flag", "two words", "one arg")
    assert split_args(join_args(("a b", "$HOME", "--x=';'"))) == ("a b", "$HOME", "--x=';'")
    with pytest.raises(ValueError, match="close the quote"):
        split_args('--name "unfinished')


_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_texts = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"),
                 max_size=30)
_lines = _texts.filter(lambda t: t.strip() != "" and "\n" not in t and "\r" not in t)
_overrides = st.builds(
    AgentOverrides,
    enabled=st.booleans(),
    path=st.none() | _lines,
    extra_args=st.lists(_texts.filter(lambda t: "{prompt}" not in t and "{session_id}" not in t),
                        max_size=4).map(tuple),
    env=st.dictionaries(_names, _texts, max_size=4),
    model=st.none() | _lines.filter(lambda t: "{" not in t and "}" not in t
                                    and not t.startswith("-")),
    permission_mode=st.sampled_from([None, "safe", "full"]),
    cwd=st.none() | _lines,
)


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["claude", "codex", "my-agent"]), _overrides),
                min_size=1, max_size=5))
def test_any_valid_overrides_round_trip_through_successive_edits(
        saves: list[tuple[str, AgentOverrides]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "settings.toml"
        path.write_text("# hand-written header\n[behaviour]\ngrace_seconds = 1.5\n")
        expected: dict[str, AgentOverrides] = {}
        for agent, o in saves:
            assert validate_overrides(replace(o, path=None, cwd=None)) == []
            save_overrides(agent, o, path)
            if o.is_default:
                expected.pop(agent, None)
            else:
                expected[agent] = o
            assert load_overrides(path) == (expected, [])
        assert path.read_text().startswith("# hand-written header\n")
        assert load_settings(path)[0].grace_seconds == 1.5


def test_cli_takes_the_retry_limit_from_settings() -> None:
    adapters = paths.user_adapters_dir()
    adapters.mkdir(parents=True, exist_ok=True)
    fixture = ROOT / "tests" / "fixtures" / "codex" / "codex_unreach.jsonl"
    retry_agent = ROOT / "tests" / "fakes" / "retry_agent.py"
    (adapters / "retrying.toml").write_text(textwrap.dedent(f"""\
        id = "retrying"
        name = "Retrying codex"
        protocol = "codex-exec-json"
        command = [{json.dumps(sys.executable)}, {json.dumps(str(retry_agent))},
                   {json.dumps(str(fixture))}, "{{prompt}}"]
        """))
    settings_path().write_text("[behaviour]\nretry_limit_seconds = 1\ngrace_seconds = 0.5\n")
    code, out, err = _cli("run", "--agent", "retrying", "--json", "hi", env=_cli_env())
    assert code == 1, err
    errors = [e["message"] for e in map(json.loads, out.splitlines()) if e["kind"] == "error"]
    assert errors and errors[0].startswith("Retrying codex could not reach the model for 1 s")
