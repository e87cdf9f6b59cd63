"""The one secret policy: which names hold secrets, and text with their values masked.

Every place that shows or writes text a secret could reach uses this module: crash reports and
log lines (tolaria/support/crash.py installs :class:`RedactingFilter`), permission cards
(tolaria/ui/transcript/pretty_input.py), the Preferences environment table (which values it hides), and
the errors and stderr lines of a run (tolaria/core/events.py ``redacted``, model-chat errors).
One policy, so a secret hidden in one place is hidden in all of them.

:func:`redact_text` masks, in order:

* values of environment variables whose names look secret (:func:`is_secret_name`), wherever
  they appear, and values registered with :func:`remember_secrets` (an adapter's ``[env]``);
* well-known key shapes (``sk-...``, ``ghp_...``, ``github_pat_...``, ``xoxb-...``, ``AKIA...``,
  ``AIza...``, ``glpat-...``, JWTs), ``Bearer``/``Basic`` credentials, ``user:pass@`` in URLs;
* values assigned to secret-looking names: ``NAME=value``, ``NAME: value``, ``"name": "value"``,
  ``--api-key value``, ``--token=value``.

It is a screen against showing a secret by accident, not a guarantee, and it errs on the side of
masking. What it must not do is garble ordinary text: paths, prose, ``token count: 5``,
``KeyError: 'x'`` and short environment values (``KEYMAP=us``) are left alone. Stdlib only: this
is the lowest layer.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
from collections.abc import Iterable, Mapping

MASK = "***"
#: Environment values shorter than this are not searched for: ``XDG_SESSION_TYPE=x11`` or a
#: ``PAT=1`` is no secret worth garbling every "x11" and "1" of a report for.
MIN_SECRET_CHARS = 8

# -- names ----------------------------------------------------------------------------------------

#: Anywhere in a name (upper-cased, words joined by "_").
_SECRET_SUBSTRINGS = ("SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "APIKEY",
                      "API_KEY", "ACCESSKEY", "ACCESS_KEY", "PRIVATEKEY", "PRIVATE_KEY")
#: Whole words that make a name secret wherever they stand (``GH_PAT``, ``PAT``, ``X_AUTH``).
_SECRET_WORDS = frozenset({"TOKEN", "PAT", "PASS", "AUTH", "AUTHORIZATION", "COOKIE", "COOKIES",
                           "APIKEY", "CREDENTIALS", "CREDS"})
#: Words that make a name secret only after another word: ``OPENAI_API_KEY`` and ``MYSQL_PWD``
#: are secrets; ``KEY_NAME``, ``PWD`` and ``KeyError`` are not. (``SESSION`` counts only as the
#: last of two or more words: ``MY_SESSION``, not ``session_id`` or ``DBUS_SESSION_BUS_ADDRESS``.)
_LATER_WORDS = frozenset({"KEY", "KEYS", "PWD"})
#: Keys that open no lock: ``sort_key``, ``cache_key``, ``keep_key``, ``public_key``...
_NOT_SECRET_KEYS = frozenset({"CACHE", "SORT", "KEEP", "PRIMARY", "FOREIGN", "PARTITION",
                              "PUBLIC", "HOT", "SHORTCUT", "LOOKUP", "ROUTING", "IDEMPOTENCY",
                              "GROUP", "INDEX", "UNIQUE", "DEDUP", "MAP", "DICT"})
#: A last word that says the name holds something *about* a secret, not the secret itself
#: (``api_key_env`` names a variable, ``TOKEN_COUNT`` counts, ``SSH_AUTH_SOCK`` is a socket,
#: ``TokenError`` is an exception, Claude's ``apiKeySource`` and ACP's ``authMethods`` say how).
_HARMLESS_LAST = frozenset({"ENV", "NAME", "NAMES", "FILE", "PATH", "DIR", "TYPE", "COUNT",
                            "LENGTH", "LEN", "LIMIT", "SIZE", "URL", "SOCK", "SOCKET", "ERROR",
                            "EXCEPTION", "WARNING", "EXPIRES", "EXPIRY", "TTL", "HINT",
                            "SOURCE", "METHOD", "METHODS", "MODE", "PROVIDER", "STATUS", "KIND"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _words(name: str) -> list[str]:
    """``OPENAI_API_KEY``, ``apiKey``, ``x-api-key`` -> upper-case words (camelCase split)."""
    return [word.upper() for word in _WORD.findall(name)]


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a variable, key, header or flag called ``name`` holds a secret: API keys, tokens,
    passwords, credentials, personal access tokens, auth headers, cookies."""
    words = _words(name)
    if not words or (len(words) > 1 and words[-1] in _HARMLESS_LAST):
        return False
    joined = "_".join(words)
    if any(part in joined for part in _SECRET_SUBSTRINGS):
        return True
    for n, word in enumerate(words):
        if word in _SECRET_WORDS or word.endswith("TOKEN"):
            return True
        if word.startswith("AUTH") and not word.startswith("AUTHOR"):  # AUTHOR is no secret
            return True
        if n > 0 and word in _LATER_WORDS and words[n - 1] not in _NOT_SECRET_KEYS:
            return True
    return len(words) > 1 and words[-1] == "SESSION"


# -- values known to be secret ------------------------------------------------------------------

#: Secret values known besides the environment (e.g. an adapter's ``[env]`` table).
_known: set[str] = set()


def remember_secrets(variables: Mapping[str, str]) -> None:
    """Mask these variables' values too, when their names look secret (a manifest's ``[env]``
    may hold a token that is in no environment until the agent runs)."""
    _known.update(value for name, value in variables.items()
                  if is_secret_name(name) and len(value.strip()) >= MIN_SECRET_CHARS)


#: (a copy of os.environ's raw data, how many values were remembered, the answer): every log
#: line is redacted, and decoding the whole environment for each one would cost more than the
#: rest of the redaction together.
_cache: tuple[dict[object, object], int, list[str]] | None = None


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the environment variables whose names look secret (and the remembered ones),
    longest first (so a value containing another is masked whole)."""
    global _cache
    raw = getattr(os.environ, "_data", None) if environ is None else None
    cached = _cache
    if isinstance(raw, dict) and cached is not None and cached[1] == len(_known) \
            and cached[0] == raw:
        return cached[2]
    env = os.environ if environ is None else environ
    found = {value for name, value in env.items()
             if len(value.strip()) >= MIN_SECRET_CHARS and is_secret_name(name)}
    values = sorted(found | set(_known), key=len, reverse=True)
    if isinstance(raw, dict):
        _cache = (dict(raw), len(_known), values)
    return values


def hide_values(text: str, values: Iterable[str]) -> str:
    """``text`` with each of ``values`` (and its stripped form) replaced by the mask."""
    for value in values:
        if value:
            text = text.replace(value, MASK)
            stripped = value.strip()
            if stripped and stripped != value:
                text = text.replace(stripped, MASK)
    return text


# -- shapes -------------------------------------------------------------------------------------

_SHAPES = re.compile("|".join((
    # OpenAI / Anthropic (sk-ant-...) / Stripe-like keys: a digit, or long enough to be random.
    r"\b(?:sk|rk|pk)-(?:(?=[A-Za-z0-9_-]{6})[A-Za-z0-9_-]*[0-9][A-Za-z0-9_-]*"
    r"|[A-Za-z0-9_-]{16,})",
    r"\bgh[pousr]_[A-Za-z0-9]{16,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bglpat-[A-Za-z0-9_-]{16,}",  # GitLab
    r"\bxox[abeprs]-[A-Za-z0-9-]{10,}",  # Slack
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"\bAIza[0-9A-Za-z_-]{30,}",  # Google API keys
    r"\bnpm_[A-Za-z0-9]{30,}",
    r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWT
)))
#: What each of _SHAPES starts with.
_SHAPE_PREFIXES = ("sk-", "rk-", "pk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "AKIA", "ASIA",
                   "AIza", "npm_", "hf_", "eyJ")
# "Bearer <credential>" anywhere; the credential has a digit or symbol, or is long (not prose
# such as "bearer authentication"). "Basic ..." is masked only after a header name (below).
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)(?:(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=])"
                     r"[A-Za-z0-9._~+/=-]{8,}|[A-Za-z0-9_-]{24,})")
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^/\s@]+(@)")
_VALUE = (r"(?P<value>\\\"[^\"]*?\\\"|\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'"
          r"|[^\s\"'`,;&|(){}\[\]][^\s\"'`,;&|)}\]]*)")
# NAME=value, NAME: value, "name": "value", 'name': 'value' (a dict's repr), \"name\": \"value\"
# (JSON inside a JSON string). "a == b", "a := b", "Foo::bar" are not assignments. The name
# takes no characters back (``*+``): what may follow it (a quote, a blank, "=", ":") is never
# one of its own, so a shorter name could not match either, and giving none back makes the
# search several times faster on long text (an export redacts every answer and tool output).
_ASSIGNMENT = re.compile(r"(?<![\w.-])(?P<q>\\?[\"']?)(?P<name>[A-Za-z_][\w.-]*+)(?P=q)"
                         r"(?P<sep>[ \t]*[=:](?![=:>])[ \t]*)"
                         r"(?P<scheme>(?i:bearer|basic|token)[ \t]+)?" + _VALUE)
# --api-key VALUE, --token=VALUE (a value that is not the next flag). The "-" comes first, so
# the search skips ahead to each "-" (the look-behind then checks the character before it).
_FLAG = re.compile(r"-(?<![\w-]-)-?(?P<name>[A-Za-z][\w-]*+)(?:=|[ \t]+)(?!-)" + _VALUE)
#: Every secret name contains one of these, lower-cased (see is_secret_name).
_NAME_HINTS = ("key", "token", "secret", "pass", "pwd", "pat", "auth", "cred", "cookie",
               "session")
#: A name hint (``_NAME_HINTS``), then what follows it in an assignment: the rest of the name,
#: its closing quote, the separator (``_ASSIGNMENT`` without the value); on lower-cased text.
_HINTED_ASSIGNMENT = re.compile(r"(?:key|token|secret|pass|pwd|pat|auth|cred|cookie|session)"
                                r"[\w.-]*+\\?[\"']?[ \t]*[=:](?![=:>])")
#: Values left as they are under a secret name: nothing, a mask, a ``${VAR}`` reference, a
#: placeholder word that is plainly not the secret.
_KEEP = re.compile(r"(?i)[\"']?(?:\**|null|none|true|false|\$\{?\w+\}?|<[^>]*>)[\"']?"
                   r"|\\\"\\\"|\"\"|''")


def _is_prose(match: re.Match[str], name: str, value: str) -> bool:
    """``The token: hand it over``, ``rejected its credentials: check...``: one plain word, a
    colon and an ordinary word are a sentence, not a secret (those have digits or symbols, or
    are long). Headers (``Authorization: ...``) and quoted or ``=`` forms are never prose."""
    if match.re is not _ASSIGNMENT:  # a flag: --token VALUE is never prose
        return False
    return (":" in match["sep"] and not match["q"] and not match["scheme"] and name.isalpha()
            and name.upper() not in ("AUTHORIZATION", "COOKIE") and value.isalpha()
            and len(value) < 12)


def _mask_assignment(match: re.Match[str]) -> str:
    value = match["value"]
    name = match["name"].rsplit(".", 1)[-1]  # self.key, config.api_key: the attribute's name
    if not is_secret_name(name) or _KEEP.fullmatch(value) or _is_prose(match, name, value):
        return match[0]
    if value.startswith('\\"'):
        masked = f'\\"{MASK}\\"'
    elif value[0] in "\"'":
        masked = f"{value[0]}{MASK}{value[0]}"
    else:
        masked = MASK
    return match[0][:match.start("value") - match.start()] + masked


def redact_text(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` without secret environment values (``environ``: default ``os.environ``), known
    key shapes and values assigned to secret-looking names."""
    text = hide_values(text, secret_values(environ))
    # Plain substring tests first: most lines hold none of these, and the patterns are slow.
    if any(prefix in text for prefix in _SHAPE_PREFIXES):
        text = _SHAPES.sub(MASK, text)
    lower = text.lower()
    if "bearer" in lower:
        text = _BEARER.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
    if "@" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m[1]}{MASK}{m[2]}", text)
    if not any(hint in lower for hint in _NAME_HINTS):  # no name in it can be secret
        return text
    if "-" in text:  # every flag starts with one
        text = _FLAG.sub(_mask_assignment, text)
    if not _may_assign_secret(text):
        return text
    return _ASSIGNMENT.sub(_mask_assignment, text)


def _may_assign_secret(text: str) -> bool:
    """False only when ``_ASSIGNMENT`` cannot mask anything in ``text``: no name hint in it is
    followed by the rest of a name, a quote and a separator (a masked name holds a hint, in
    ASCII letters). Several times faster than the pattern, which tries every word; text that is
    not ASCII always goes to the pattern (lower-casing could move its positions)."""
    return not text.isascii() or _HINTED_ASSIGNMENT.search(text.lower()) is not None


def redact_data(value: object) -> object:
    """A copy of a JSON-like value (a tool's input) with the values under secret-looking keys
    masked and every string passed through :func:`redact_text`."""
    if isinstance(value, dict):
        return {key: (MASK if isinstance(key, str) and is_secret_name(key)
                      and value[key] not in (None, "") and not isinstance(value[key], bool)
                      else redact_data(value[key]))
                for key in value}
    if isinstance(value, list | tuple):
        return [redact_data(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


# -- logging ------------------------------------------------------------------------------------

class RedactingFilter(logging.Filter):
    """Redacts a record in place before a handler writes it (message and traceback).

    Install it on handlers: a filter on a logger only sees records logged on that very logger,
    not those that propagate to it from ``tolaria.core...`` loggers.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        with contextlib.suppress(Exception):
            message = record.getMessage()
            record.msg, record.args = redact_text(message), None
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = redact_text(record.exc_text)
            if record.stack_info:
                record.stack_info = redact_text(record.stack_info)
        return True
