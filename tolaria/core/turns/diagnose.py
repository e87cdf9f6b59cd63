"""Turn an agent's failure text into a category and one actionable line naming the agent.

The CLIs word the same failure differently (a bad key is "Invalid API key" for Claude Code,
"401 Unauthorized" for Codex, ``UNAUTHENTICATED`` for Gemini, "[API Error: 401" for Qwen, a
``statusCode`` 401 for opencode); the chat shows the raw text anyway, and above it a hint that says
what to do. The patterns come from real captured output (tests/fixtures/<cli>/*_401.jsonl and
*_unreach.jsonl, and the retry captures described in docs/retries.md).

The final error text is classified first; only when it says nothing recognisable are the stderr
tail and the exit code consulted (stderr is noisy: Qwen prints an ``EACCES`` about ripgrep on
every run, so generic words such as "permission denied" are deliberately not patterns).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

AUTH = "auth"
UNREACHABLE = "unreachable"
RATE_LIMIT = "rate_limit"
PERMISSION = "permission"
NOT_INSTALLED = "not_installed"
UNKNOWN = "unknown"
CATEGORIES = (AUTH, UNREACHABLE, RATE_LIMIT, PERMISSION, NOT_INSTALLED, UNKNOWN)

#: Shell convention: the command was not found.
_EXIT_NOT_FOUND = 127

_ROOT_SKIP_PERMISSIONS = re.compile(
    r"dangerously-skip-permissions cannot be used with root", re.IGNORECASE)

#: Checked in this order: the first category with a matching pattern wins.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile("|".join(patterns), re.IGNORECASE))
    for category, patterns in (
        (NOT_INSTALLED, [r"not found on PATH", r"command not found",
                         r"cannot start .*No such file"]),
        (PERMISSION, [_ROOT_SKIP_PERMISSIONS.pattern, r"requires? (?:user )?approval",
                      r"permission (?:was )?(?:refused|denied) (?:by|for)",
                      r"(?:tool|command) (?:call )?(?:was )?(?:denied|rejected|blocked)\b"]),
        (AUTH, [r"\b401\b", r"unauthori[sz]ed", r"UNAUTHENTICATED", r"API key not valid",
                r"invalid[ _-]?(?:x-)?api[ _-]?key", r"incorrect API key", r"please run /login",
                r"not logged in", r"authentication[ _](?:error|failed)",
                r"invalid auth method", r"must specify the \w*API_KEY",
                r"\bAPI[ _]key (?:is )?(?:missing|required|not set)"]),
        (RATE_LIMIT, [r"\b429\b", r"rate[ _-]?limit", r"too many requests", r"RESOURCE_EXHAUSTED",
                      r"exceeded your current quota", r"quota exceeded"]),
        (UNREACHABLE, [r"ECONNREFUSED", r"connection refused", r"ENOTFOUND", r"EAI_AGAIN",
                       r"getaddrinfo", r"ETIMEDOUT", r"ECONNRESET", r"fetch failed",
                       r"Reconnecting\.\.\.", r"waiting for network", r"connection failed",
                       r"connection_failed", r"error sending request", r"unable to connect",
                       r"cannot connect to API", r"could not resolve host",
                       r"network is unreachable"]),
    )
)


@dataclass(frozen=True)
class Diagnosis:
    category: str
    #: One line saying what to do, naming the agent; empty when nothing useful is known.
    hint: str


@dataclass(frozen=True)
class Agent:
    """What a hint needs to know about the agent (taken from its manifest)."""

    id: str
    name: str
    protocol: str = ""
    install_hint: str = ""

    @property
    def family(self) -> str:
        """Which CLI this is (``claude``, ``codex``...), or "" for one we have no advice for."""
        for candidate in (self.id.lower(), self.protocol.lower()):
            for family in _FAMILIES:
                if candidate.startswith(family):
                    return family
        return ""


_FAMILIES = ("claude", "codex", "gemini", "qwen", "opencode")

_AUTH_HINTS = {
    "claude": "{name} rejected the API key: set ANTHROPIC_API_KEY or run `claude` once to log in.",
    "codex": "{name} rejected the API key: set OPENAI_API_KEY (or your provider's env_key in "
             "~/.codex/config.toml) or run `codex login`.",
    "gemini": "{name} rejected the API key: set GEMINI_API_KEY or run `gemini` once to sign in.",
    "qwen": "{name} rejected the API key: set OPENAI_API_KEY (with OPENAI_BASE_URL and "
            "OPENAI_MODEL) or run `qwen` once and sign in with /auth.",
    "opencode": "{name}'s provider rejected the API key: run `opencode auth login` or fix the "
                "provider's apiKey in opencode.json.",
    "": "{name} rejected its credentials: check its API key, or run it once in a terminal to "
        "log in.",
}
_UNREACHABLE_HINTS = {
    "claude": "{name} could not reach the model API: check your network, proxy or "
              "ANTHROPIC_BASE_URL.",
    "codex": "{name} could not reach the model: check your network or the provider's base_url "
             "in ~/.codex/config.toml.",
    "gemini": "{name} could not reach the model API: check your network, proxy or "
              "GOOGLE_GEMINI_BASE_URL.",
    "qwen": "{name} could not reach the model API: check your network, proxy or "
            "OPENAI_BASE_URL.",
    "opencode": "{name} could not reach its provider: check your network or the provider's "
                "baseURL in opencode.json.",
    "": "{name} could not reach the model: check your network or the provider's base URL.",
}


def classify(text: str) -> str:
    """The category of one failure text, or ``unknown``."""
    for category, pattern in _PATTERNS:
        if pattern.search(text):
            return category
    return UNKNOWN


def hint(category: str, agent: Agent, text: str = "") -> str:
    """The actionable line for ``category`` (``text`` refines it where the wording matters)."""
    name, family = agent.name, agent.family
    if category == AUTH:
        return _AUTH_HINTS[family].format(name=name)
    if category == UNREACHABLE:
        return _UNREACHABLE_HINTS[family].format(name=name)
    if category == RATE_LIMIT:
        return (f"{name} was rate limited by its provider (HTTP 429): wait a minute and try "
                f"again, or check your plan's usage limits.")
    if category == PERMISSION:
        if _ROOT_SKIP_PERMISSIONS.search(text):
            return (f"{name} refuses --dangerously-skip-permissions as root: run Tolaria as a "
                    f"normal user, or allow tools with --allowedTools in its adapter instead.")
        return (f"{name} was refused permission for a tool: allow it in the agent's own "
                f"settings or in its adapter's arguments.")
    if category == NOT_INSTALLED:
        how = f"install it with `{agent.install_hint}`" if agent.install_hint \
            else "install it, or put the full path in its adapter"
        return f"{name} is not installed or not on PATH: {how}."
    return ""


def diagnose(message: str, agent: Agent, stderr_tail: Sequence[str] = (),
             exit_code: int | None = None) -> Diagnosis:
    """Classify a failed turn from its error text, then its stderr tail, then its exit code."""
    category, context = classify(message), message
    if category == UNKNOWN and stderr_tail:
        context = "\n".join(stderr_tail)
        category = classify(context)
    if category == UNKNOWN and exit_code == _EXIT_NOT_FOUND:
        category = NOT_INSTALLED
    return Diagnosis(category, hint(category, agent, context))


def retry_cutoff(agent: Agent, seconds: float, detail: str) -> tuple[str, Diagnosis]:
    """The error text and diagnosis for a run Tolaria stopped because it kept retrying.

    ``detail`` is what the agent said about its retries. A retry that names no recognisable
    cause (Claude's ``api_retry`` says only "unknown" when the connection is refused) counts as
    the model being unreachable: that is why CLIs retry without end.
    """
    category = classify(detail)
    if category not in (AUTH, RATE_LIMIT):
        category = UNREACHABLE
    short = detail if len(detail) <= 120 else detail[:117] + "..."
    if category == RATE_LIMIT:
        message = (f"{agent.name} was rate limited for {seconds:g} s ({short}); stopped it. "
                   f"Wait a minute and try again, or check your plan's usage limits.")
    elif category == AUTH:
        message = (f"{agent.name} kept retrying a rejected request for {seconds:g} s ({short}); "
                   f"stopped it.")
    else:
        message = (f"{agent.name} could not reach the model for {seconds:g} s ({short}); "
                   f"stopped it. Check your network or the provider's base URL.")
    return message, Diagnosis(category, hint(category, agent, detail))
