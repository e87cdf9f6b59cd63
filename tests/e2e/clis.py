"""The real CLIs of the end-to-end tier: pinned npm packages, installed once into a cache folder
outside the repository, and what each needs to talk only to the loopback fake model server.

Cache: ``$TOLARIA_E2E_CACHE`` or ``$XDG_CACHE_HOME/tolaria-e2e`` (``~/.cache/tolaria-e2e``). A
package is installed into a temporary folder and renamed into place when complete, so an
interrupted install is never mistaken for a good one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from e2e.fake_model import GOOD_KEY


@dataclass(frozen=True)
class Cli:
    #: The built-in adapter id (adapters/<id>.toml) that the tests run.
    agent: str
    package: str
    version: str
    #: The program the package puts in node_modules/.bin.
    bin: str

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"

    @property
    def folder_name(self) -> str:
        return self.spec.lstrip("@").replace("/", "-").replace("@", "-")


CLIS = {
    "claude": Cli("claude", "@anthropic-ai/claude-code", "2.1.332", "claude"),
    "codex": Cli("codex", "@openai/codex", "0.171.0", "codex"),
    "gemini": Cli("gemini", "@google/gemini-cli", "0.61.0", "gemini"),
    "qwen": Cli("qwen", "@qwen-code/qwen-code", "0.24.4", "qwen"),
    "opencode": Cli("opencode", "opencode-ai", "1.18.33", "opencode"),
    "claude-acp": Cli("claude-acp", "@zed-industries/claude-agent-acp", "0.23.1", "claude-agent-acp"),
}

#: Telemetry, update checks and error reporting off, for every CLI (../reference: cli-agents.md).
QUIET_ENV = {
    "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_ERROR_REPORTING": "1",
    "GEMINI_TELEMETRY_ENABLED": "false", "GEMINI_CLI_NO_RELAUNCH": "true",
    "NO_UPDATE_NOTIFIER": "1", "npm_config_update_notifier": "false", "DO_NOT_TRACK": "1",
    "OTEL_SDK_DISABLED": "true", "CLAUDE_CODE_MAX_RETRIES": "0",
    "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
}


class RegistryUnreachable(RuntimeError):
    """npm or its registry is not available: the tier is skipped (loudly), not failed."""


def cache_root() -> Path:
    if os.environ.get("TOLARIA_E2E_CACHE"):
        return Path(os.environ["TOLARIA_E2E_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tolaria-e2e"


def bin_dir(cli: Cli) -> Path:
    return cache_root() / "npm" / cli.folder_name / "node_modules" / ".bin"


def installed(cli: Cli) -> bool:
    return (bin_dir(cli) / cli.bin).exists() and (
        cache_root() / "npm" / cli.folder_name / ".complete").exists()


def registry_reachable(timeout: float = 30.0) -> str | None:
    """None when ``npm ping`` works, else why not."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed"
    try:
        r = subprocess.run([npm, "ping"], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"`npm ping` timed out after {timeout:g} s"
    if r.returncode != 0:
        return f"`npm ping` failed: {(r.stderr or r.stdout).strip()[:300]}"
    return None


def install(cli: Cli, timeout: float = 900.0) -> Path:
    """Install ``cli`` into the cache unless it is already there; return its bin folder."""
    if installed(cli):
        return bin_dir(cli)
    why = registry_reachable()
    if why:
        raise RegistryUnreachable(why)
    root = cache_root() / "npm"
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{cli.folder_name}-", dir=root))
    try:
        r = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix",
             str(staging), cli.spec], capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL, cwd=staging)
        if r.returncode != 0:
            raise RuntimeError(f"npm install {cli.spec} failed: {r.stderr.strip()[-2000:]}")
        promote(staging, root / cli.folder_name, cli.spec)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return bin_dir(cli)


def promote(staging: Path, final: Path, spec: str) -> None:
    """Mark the complete ``staging`` folder with ``spec`` and rename it into place."""
    (staging / ".complete").write_text(spec)
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)


def run_env(cli: Cli, home: Path, model_url: str, key: str = GOOD_KEY) -> dict[str, str]:
    """What a user would have set up for ``cli``, pointed at the fake model server: the run's
    extra environment (a throwaway HOME with the CLI's own config files written into it)."""
    home.mkdir(parents=True, exist_ok=True)
    env = dict(QUIET_ENV)
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env["XDG_DATA_HOME"] = str(home / ".local" / "share")
    env["XDG_CACHE_HOME"] = str(home / ".cache")
    env["PATH"] = f"{bin_dir(cli)}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    if cli.agent in ("claude", "claude-acp"):
        env.update(ANTHROPIC_BASE_URL=model_url, ANTHROPIC_API_KEY=key)
        if cli.agent == "claude-acp":
            env["CLAUDE_CODE_EXECUTABLE"] = str(bin_dir(CLIS["claude"]) / "claude")
            env["PATH"] = f"{bin_dir(CLIS['claude'])}{os.pathsep}{env['PATH']}"
            if os.geteuid() == 0:
                env["IS_SANDBOX"] = "1"
    elif cli.agent == "codex":
        env["CODEX_HOME"] = str(home / ".codex")
        env["TOLARIA_E2E_KEY"] = key
        (home / ".codex").mkdir(exist_ok=True)
        (home / ".codex" / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "fake"\n'
            "[model_providers.fake]\n"
            f'name = "fake"\nbase_url = "{model_url}/v1"\nenv_key = "TOLARIA_E2E_KEY"\n'
            'wire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
            "[features]\nplugins = false\n")
    elif cli.agent == "gemini":
        env.update(GOOGLE_GEMINI_BASE_URL=model_url, GEMINI_API_KEY=key)
        (home / ".gemini").mkdir(exist_ok=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"},
                         "folderTrust": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}))
    elif cli.agent == "qwen":
        env.update(OPENAI_BASE_URL=f"{model_url}/v1", OPENAI_API_KEY=key,
                   OPENAI_MODEL="fake-model")
    elif cli.agent == "opencode":
        env["TOLARIA_E2E_KEY"] = key
        conf = home / ".config" / "opencode"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "opencode.json").write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json",
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                  "options": {"baseURL": f"{model_url}/v1",
                                              "apiKey": "{env:TOLARIA_E2E_KEY}"},
                                  "models": {"fake-model": {"name": "Fake model"}}}},
            "model": "fake/fake-model", "autoupdate": False, "share": "disabled"}))
    return env
