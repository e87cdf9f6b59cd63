"""Permission modes and resume commands, checked on the argv a real process receives.

Each built-in CLI manifest is run with its program replaced by tests/fakes/argv_agent.py
(installed under the CLI's own name in a folder put first on the run's PATH), so the test sees
exactly what Tolaria spawns: the mode's ``[permission_args]`` and ``[permission_env]``, the
``resume`` arguments or the whole ``resume_command``, and a prompt that starts with ``--``
arriving as the prompt, never as a flag.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import Collector, async_test

from tolaria.core.adapters.manifest import Manifest, StopPolicy, load_adapters
from tolaria.core.events import Diagnostic, Error
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

FAKES = Path(__file__).resolve().parents[2] / "fakes"
ARGV_AGENT = FAKES / "argv_agent.py"
HOSTILE = "--help --yolo @secrets.txt"

#: (manifest id, mode) -> the argv after the program, with PROMPT standing for the prompt.
EXPECTED: dict[tuple[str, str], list[str]] = {
    ("codex", "safe"): ["exec", "--json", "--skip-git-repo-check", "-c",
                        'sandbox_mode="workspace-write"', "--", "PROMPT"],
    ("codex", "full"): ["exec", "--json", "--skip-git-repo-check",
                        "--dangerously-bypass-approvals-and-sandbox", "--", "PROMPT"],
    ("gemini", "safe"): ["--output-format", "stream-json", "--skip-trust", "--prompt=PROMPT",
                         "--approval-mode", "auto_edit"],
    ("gemini", "full"): ["--output-format", "stream-json", "--skip-trust", "--prompt=PROMPT",
                         "--approval-mode", "yolo"],
    ("qwen", "safe"): ["--output-format", "stream-json", "--prompt=PROMPT",
                       "--approval-mode", "auto-edit"],
    ("qwen", "full"): ["--output-format", "stream-json", "--prompt=PROMPT",
                       "--approval-mode", "yolo"],
    ("opencode", "safe"): ["run", "--format", "json", "--", "PROMPT"],
    ("opencode", "full"): ["run", "--format", "json", "--auto", "--", "PROMPT"],
    ("cursor", "safe"): ["-p", "--output-format", "stream-json", "--trust", "--", "PROMPT"],
    ("cursor", "full"): ["-p", "--output-format", "stream-json", "--trust", "--force", "--",
                         "PROMPT"],
    ("pi", "safe"): ["--mode", "json", "--tools", "read,edit,write,grep,find,ls"],
    ("pi", "full"): ["--mode", "json", "--tools", "read,bash,edit,write,grep,find,ls"],
    ("copilot", "safe"): ["-s", "--no-ask-user", "-p", "PROMPT", "--allow-tool=write",
                          "--deny-tool=shell"],
    ("copilot", "full"): ["-s", "--no-ask-user", "-p", "PROMPT", "--allow-all-tools"],
    ("antigravity", "safe"): ["-p", "PROMPT"],
    ("antigravity", "full"): ["-p", "PROMPT"],
    ("kiro", "safe"): ["chat", "--no-interactive", "--trust-tools=fs_read,fs_write"],
    ("kiro", "full"): ["chat", "--no-interactive", "--trust-all-tools"],
    ("hermes", "safe"): ["chat", "-q=PROMPT"],
    ("hermes", "full"): ["chat", "-q=PROMPT", "--yolo"],
    ("aider", "safe"): ["--no-pretty", "--yes-always", "--message=PROMPT",
                        "--no-suggest-shell-commands"],
    ("aider", "full"): ["--no-pretty", "--yes-always", "--message=PROMPT"],
}


def install_fake(bin_dir: Path, program: str) -> None:
    """``program`` in ``bin_dir``: the argv agent under the real CLI's name."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / program
    path.write_text(f"#!{sys.executable}\n" + ARGV_AGENT.read_text())
    path.chmod(0o755)


async def spawned(manifest: Manifest, tmp_path: Path, prompt: str, *,
                  mode: str | None = None, session_id: str | None = None,
                  watch_env: str = "") -> dict[str, Any]:
    """What the agent process of one run reported: its argv, stdin and watched variables."""
    bin_dir = tmp_path / "bin"
    install_fake(bin_dir, manifest.command[0])
    # Parse its one line as text: the argv agent speaks no agent dialect.
    manifest = dataclasses.replace(manifest, protocol="lines")
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "ARGV_AGENT_ENV": watch_env}
    request = RunRequest(manifest, prompt, str(tmp_path), env, session_id=session_id,
                         permission_mode=mode)
    collector = Collector()
    done = await stream_ai_agent(request, new_stream_id(), collector,
                                 registry=ProcessRegistry(), grace_s=0.5)
    assert done.stop_reason == "end_turn", collector.events
    report: dict[str, Any] = json.loads(collector.text())
    return report


def expected(ident: str, mode: str, prompt: str) -> list[str]:
    return [part.replace("PROMPT", prompt) for part in EXPECTED[(ident, mode)]]


def test_every_cli_manifest_has_expectations() -> None:
    adapters = load_adapters()
    assert not adapters.errors
    cli = {m.id for m in adapters.manifests.values()
           if m.protocol not in ("acp", "openai-chat") and not m.command[0].startswith("{")}
    cli.discard("claude")  # its manifest is rewritten elsewhere; its argv is checked below
    assert cli == {ident for ident, _ in EXPECTED}


@pytest.mark.parametrize(("ident", "mode"), sorted(EXPECTED))
def test_spawned_argv_per_mode(tmp_path: Path, ident: str, mode: str) -> None:
    @async_test
    async def run() -> None:
        manifest = load_adapters().get(ident)
        report = await spawned(manifest, tmp_path, HOSTILE, mode=mode)
        assert report["argv"] == expected(ident, mode, HOSTILE)
        # The prompt is either one argument (above) or all of stdin, never both.
        assert report["stdin"] == (HOSTILE if manifest.takes_prompt_on_stdin else "")

    run()


@async_test
async def test_opencode_safe_mode_denies_the_shell_through_its_environment(tmp_path: Path) -> None:
    manifest = load_adapters().get("opencode")
    safe = await spawned(manifest, tmp_path, "hi", mode="safe", watch_env="OPENCODE_PERMISSION")
    assert json.loads(safe["env"]["OPENCODE_PERMISSION"]) == {"bash": "deny"}
    full = await spawned(manifest, tmp_path, "hi", mode="full", watch_env="OPENCODE_PERMISSION")
    assert full["env"]["OPENCODE_PERMISSION"] is None


@async_test
async def test_codex_continues_a_thread_with_its_resume_command(tmp_path: Path) -> None:
    manifest = load_adapters().get("codex")
    report = await spawned(manifest, tmp_path, "-x now", session_id="0199a213-thread")
    assert report["argv"] == ["exec", "resume", "--json", "--skip-git-repo-check", "-c",
                              'sandbox_mode="workspace-write"', "--", "0199a213-thread", "-x now"]
    report = await spawned(manifest, tmp_path, "go", mode="full", session_id="t1")
    assert report["argv"] == ["exec", "resume", "--json", "--skip-git-repo-check",
                              "--dangerously-bypass-approvals-and-sandbox", "--", "t1", "go"]


@pytest.mark.parametrize(("ident", "tail"), [("opencode", ["--session", "S-1", "--", "--p"]),
                                             ("cursor", ["--resume", "S-1", "--", "--p"]),
                                             ("qwen", ["--approval-mode", "auto-edit",
                                                       "--resume", "S-1"]),
                                             ("gemini", ["--approval-mode", "auto_edit",
                                                         "--resume", "S-1"])])
def test_resume_arguments_go_before_the_prompt_separator(tmp_path: Path, ident: str,
                                                         tail: list[str]) -> None:
    @async_test
    async def run() -> None:
        report = await spawned(load_adapters().get(ident), tmp_path, "--p", session_id="S-1")
        assert report["argv"][-len(tail):] == tail

    run()


def test_claude_permission_args_for_the_lead(tmp_path: Path) -> None:
    """The Claude arguments proposed in the report, on a manifest shaped like claude.toml."""

    @async_test
    async def run() -> None:
        manifest = Manifest(
            id="claude-like", name="Claude-like", protocol="claude-stream-json",
            command=("claude", "-p", "--output-format", "stream-json", "--verbose", "--",
                     "{prompt}"),
            resume=("--resume", "{session_id}"),
            permission_args={
                "safe": ("--permission-mode", "acceptEdits", "--disallowedTools", "Bash"),
                "full": ("--permission-mode", "acceptEdits", "--allowedTools", "Bash")})
        report = await spawned(manifest, tmp_path, "--help", mode="full", session_id="abc")
        # --allowedTools takes a list of tools: only the `--` keeps the prompt out of it.
        assert report["argv"] == ["-p", "--output-format", "stream-json", "--verbose",
                                  "--permission-mode", "acceptEdits", "--allowedTools", "Bash",
                                  "--resume", "abc", "--", "--help"]

    run()


# --- the request's mode over the manifest's default ------------------------------------------


def argv_manifest(default: str) -> Manifest:
    return Manifest(id="argv", name="Argv agent", protocol="lines",
                    command=("argv-agent", "--", "{prompt}"), permissions=default,
                    permission_args={"safe": ("--read-only",), "full": ("--shell",)},
                    permission_env={"full": {"AGENT_SHELL": "1"}})


@pytest.mark.parametrize(("default", "requested", "flag"),
                         [("safe", None, "--read-only"), ("full", None, "--shell"),
                          ("safe", "full", "--shell"), ("full", "safe", "--read-only")])
def test_request_mode_overrides_the_manifest_default(tmp_path: Path, default: str,
                                                     requested: str | None, flag: str) -> None:
    @async_test
    async def run() -> None:
        report = await spawned(argv_manifest(default), tmp_path, "-v", mode=requested,
                               watch_env="AGENT_SHELL")
        assert report["argv"] == [flag, "--", "-v"]
        assert report["env"]["AGENT_SHELL"] == ("1" if flag == "--shell" else None)

    run()


@async_test
async def test_unknown_request_mode_fails_before_spawning(tmp_path: Path) -> None:
    collector = Collector()
    request = RunRequest(argv_manifest("safe"), "hi", str(tmp_path), permission_mode="yolo")
    done = await stream_ai_agent(request, new_stream_id(), collector, registry=ProcessRegistry())
    assert done.stop_reason == "error"
    errors = [e.message for e in collector.events if isinstance(e, Error)]
    assert len(errors) == 1 and "'yolo'" in errors[0] and "safe, full" in errors[0]


# --- ACP: the mode answers session/request_permission ----------------------------------------


@pytest.mark.parametrize(("default", "requested", "answer"),
                         [("safe", "full", "yes"), ("full", "safe", "no"), ("full", None, "yes")])
def test_acp_permission_follows_the_request_mode(tmp_path: Path, default: str,
                                                 requested: str | None, answer: str) -> None:
    pytest.importorskip("acp")

    @async_test
    async def run() -> None:
        manifest = Manifest(id="fake-acp", name="Fake ACP", protocol="acp",
                            command=(sys.executable, str(FAKES / "fake_acp_agent.py"),
                                     "ask_permission"),
                            stop=StopPolicy(polite_window_ms=1000), permissions=default)
        collector = Collector()
        request = RunRequest(manifest, "rm", str(tmp_path), permission_mode=requested)
        done = await stream_ai_agent(request, new_stream_id(), collector,
                                     registry=ProcessRegistry(), grace_s=0.5)
        assert done.stop_reason == "end_turn"
        assert f"permission: {answer}" in collector.text()
        notes = [e.message for e in collector.events
                 if isinstance(e, Diagnostic) and e.source == "permission"]
        mode = requested or default
        assert len(notes) == 1 and f'permission mode "{mode}"' in notes[0]

    run()


# --- built-ins whose program is Tolaria's own Python --------------------------------------------


@async_test
async def test_demo_agent_keeps_a_flag_like_prompt_as_the_prompt(tmp_path: Path) -> None:
    collector = Collector()
    request = RunRequest(load_adapters().get("demo"), "--version --resume x", str(tmp_path),
                         {"TOLARIA_DEMO_DELAY": "0", "TOLARIA_DEMO_TOOL_SECONDS": "0"})
    done = await stream_ai_agent(request, new_stream_id(), collector, registry=ProcessRegistry())
    assert done.stop_reason == "end_turn"
    assert 'You asked "--version --resume x".' in collector.text()
    assert "Continuing session" not in collector.text()


@async_test
async def test_unconfigured_custom_command_only_explains_itself(tmp_path: Path) -> None:
    manifest = load_adapters().get("custom-command")
    assert manifest.protocol == "lines" and manifest.takes_prompt_on_stdin
    work = tmp_path / "work"
    work.mkdir()
    collector = Collector()
    request = RunRequest(manifest, "rm -rf ~; touch pwned", str(work))
    done = await stream_ai_agent(request, new_stream_id(), collector, registry=ProcessRegistry())
    assert (done.stop_reason, done.exit_code) == ("error", 2)
    error, = (e.message for e in collector.events if isinstance(e, Error))
    assert "not configured" in error and "docs/ADAPTERS.md" in error
    assert list(work.iterdir()) == []  # ran nothing of the prompt
