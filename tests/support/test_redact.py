"""The one secret policy (tolaria/support/redact.py): which names are secret, what text loses,
what it keeps, the logging filter, and that no second policy hides elsewhere in the package.

Each consumer is checked against the same table (tests/redact_cases.py) in its own test file.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from redact_cases import ENV, HARMLESS, LEAKS, PLAIN_NAMES, SECRET_NAMES, Leak

from tolaria.support import redact
from tolaria.support.redact import MASK, RedactingFilter, is_secret_name, redact_data, redact_text

PACKAGE = Path(__file__).resolve().parents[2] / "tolaria"


@pytest.fixture(autouse=True)
def no_remembered_secrets() -> Iterator[None]:
    """remember_secrets is process-wide: each test starts and ends without any."""
    saved = set(redact._known)
    redact._known.clear()
    yield
    redact._known.clear()
    redact._known.update(saved)


@pytest.mark.parametrize("leak", LEAKS, ids=lambda leak: leak.text[:30])
def test_each_secret_is_masked_and_its_context_kept(leak: Leak) -> None:
    shown = redact_text(leak.text, environ=ENV)
    assert leak.secret not in shown and MASK in shown, shown
    assert leak.kept in shown, shown


@pytest.mark.parametrize("text", HARMLESS)
def test_harmless_text_is_left_alone(text: str) -> None:
    assert redact_text(text, environ=ENV) == text


@pytest.mark.parametrize(("text", "expected"), [
    ("Authorization: Bearer abcdef123456", "Authorization: Bearer ***"),
    ("GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwx", "GITHUB_TOKEN=***"),
    ("key AIzaSyA-1234567890abcdefghijklmnopqrstu here", "key *** here"),
    ("api_key: abc password=x", "api_key: *** password=***"),
    ('{"token": "abc", "n": 1}', '{"token": "***", "n": 1}'),
    (r'{\"token\": \"abc\"}', r'{\"token\": \"***\"}'),  # JSON inside a JSON string
    ("{'LEAKY_PASSWORD': 'xyzxyz', 'a': 1}", "{'LEAKY_PASSWORD': '***', 'a': 1}"),  # a repr
    ("tool --password secret-1 --no-auth --x", "tool --password *** --no-auth --x"),
    ('PASSWORD="two words" after', 'PASSWORD="***" after'),
    ("plain words, a path /usr/bin and us", "plain words, a path /usr/bin and us"),
    ("The token: hand it over", "The token: hand it over"),  # prose, not an assignment
    ("password: hunter22 Token: 0123abcd", "password: *** Token: ***"),
    ("Authorization: sometoken", "Authorization: ***"),  # a header is never prose
    ("self.key = key; start_new_session=True", "self.key = key; start_new_session=True"),
    ("config.api_key = abc", "config.api_key = ***"),
    ("a == b; x := 3; Foo::bar; token != x", "a == b; x := 3; Foo::bar; token != x"),
    ("TokenError: ('EOF in multi-line statement', (2, 0))",
     "TokenError: ('EOF in multi-line statement', (2, 0))"),
    ("the bearer of bearer authentication, basic functionality",
     "the bearer of bearer authentication, basic functionality"),
])
def test_redact_text_exactly(text: str, expected: str) -> None:
    assert redact_text(text, environ={"KEYMAP": "us"}) == expected


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_plain_names(name: str) -> None:
    assert not is_secret_name(name)


def test_any_value_of_a_secret_named_variable_is_masked_wherever_it_appears() -> None:
    env = {"DB_PASSWORD": "hunter22", "SOME_TOKEN": "  tok-with-spaces  ", "HOME": "/root",
           "X_SECRET": "1", "GH_PAT": "short"}
    assert redact_text("pw hunter22 tok-with-spaces /root 1 short", env) == \
        "pw *** *** /root 1 short"  # too short to look for: "1" and "short" stay


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_CREDS", "opaque-value-0123")
    assert redact_text("using opaque-value-0123") == "using ***"
    monkeypatch.setenv("TEAM_CREDS", "another-value-4567")  # a change is seen at once
    assert redact_text("using opaque-value-0123 and another-value-4567") == \
        "using opaque-value-0123 and ***"


def test_remembered_secrets_are_masked_too() -> None:
    redact.remember_secrets({"SERVICE_TOKEN": "from-a-manifest-0123", "LANG": "from-a-manifest"})
    assert redact_text("x from-a-manifest-0123 y", {}) == "x *** y"
    assert redact_text("x from-a-manifest y", {}) == "x from-a-manifest y"


def test_redact_data_masks_values_under_secret_keys() -> None:
    data = {"command": "echo sk-abc123xyz", "env": {"API_KEY": 12345678, "HOME": "/home/me",
                                                   "token": None, "password": ""},
            "headers": [{"Authorization": "Bearer x"}], "is_token": True}
    assert redact_data(data) == {
        "command": "echo ***", "env": {"API_KEY": MASK, "HOME": "/home/me", "token": None,
                                       "password": ""},
        "headers": [{"Authorization": MASK}], "is_token": True}


def test_the_logging_filter_redacts_messages_arguments_and_tracebacks() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactingFilter())
    log = logging.getLogger("tolaria.test.redact")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("calling with %s", "sk-abc123xyz")
        try:
            raise RuntimeError("export GH_PAT=hunter2hunter2")
        except RuntimeError:
            log.exception("failed: token count: %d", 5)
        log.warning("%s", " | ".join(HARMLESS))
    finally:
        log.removeHandler(handler)
        log.propagate = True
    text = out.getvalue()
    assert "calling with ***" in text and "sk-abc123xyz" not in text
    assert "RuntimeError: export GH_PAT=***" in text and "hunter2" not in text
    assert "failed: token count: 5" in text and " | ".join(HARMLESS) in text


def test_a_log_line_without_secrets_costs_little() -> None:
    """Every log line and stderr line goes through redact_text: the fast path must hold (no
    environment decoding, no pattern scan without a hint); a loose bound, not a benchmark."""
    import time

    line = "2026-01-01 WARNING tolaria.core: request to https://host/v1 failed after 3 tries"
    redact_text(line)
    started = time.perf_counter()
    for _ in range(2000):
        redact_text(line)
    assert time.perf_counter() - started < 2.0


def test_there_is_no_second_secret_policy_in_the_package() -> None:
    """The old copies (crash.py, pretty_input.py, overrides.py, model chat) are gone: only
    redact.py holds key shapes or defines what a secret name is."""
    own = re.compile(r"gh\[pousr\]|xox\[|AKIA|AIza|def is_secret_name|def redact_text"
                     r"|_SECRET_(?:NAME|KEY|TEXT|PARTS|WORDS)")
    found = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
             if own.search(path.read_text(encoding="utf-8"))]
    assert found == ["support/redact.py"]
