"""One table of secrets and of harmless text, checked against every consumer of the one secret
policy (tolaria/support/redact.py): crash reports and logs (tests/support/test_crash_reports.py),
permission cards (tests/ui/test_permission_card.py), the Preferences env table
(tests/ui/test_settings_env.py, tests/config/test_agent_config.py), model-chat errors
(tests/core/modelchat/test_openai_chat.py) and a run's errors and stderr lines
(tests/core/turns/test_redacted_events.py). The policy itself: tests/support/test_redact.py.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Leak:
    #: Text a consumer may be given.
    text: str
    #: What must not come out of it.
    secret: str
    #: What must still be there (the reader sees what was hidden, and where).
    kept: str


#: The consumers' environment holds this variable: its name gives it away, its value matches no
#: pattern (only the environment scan can catch it).
ENV = {"DEPLOY_PAT": "plain-looking-value-42"}

LEAKS = (
    # Measured before there was one policy: masked in Preferences, left in crash reports.
    Leak("export GH_PAT=hunter2hunter2", "hunter2hunter2", "export GH_PAT="),
    # Measured: masked in crash reports, shown on permission cards (too short for the cards' rule).
    Leak("using key sk-abc123xyz now", "sk-abc123xyz", "using key"),
    Leak("key sk-ant-api03-AbCdEf0123456789xyz here", "AbCdEf0123456789", "key"),
    Leak("curl -H 'Authorization: Bearer abc.def-0123456789' https://api.example.com",
         "abc.def-0123456789", "Authorization: Bearer"),
    Leak("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA", "Authorization: Basic"),
    Leak('{"api_key": "json-value-0123", "model": "gpt-4o"}', "json-value-0123",
         '"model": "gpt-4o"'),
    Leak("tool --api-key flag-value-0123 --verbose", "flag-value-0123", "--verbose"),
    Leak("tool --token=equals-value-0123 --verbose", "equals-value-0123", "--token="),
    Leak("OPENAI_API_KEY: 'quoted secret value'", "quoted secret value", "OPENAI_API_KEY"),
    Leak("DB_PASSWORD=pw-01234567 make db", "pw-01234567", "make db"),
    Leak("pushing with ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghij", "pushing with"),
    Leak("using github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "11ABCDEFG0123456789",
         "using"),
    Leak("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890", "slack"),
    Leak("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "aws"),
    Leak("google AIzaSyA-1234567890abcdefghijklmnopqrstu", "AIzaSyA-1234567890", "google"),
    Leak("gitlab glpat-abcdefghij0123456789", "glpat-abcdefghij", "gitlab"),
    Leak("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0",
         "eyJhbGciOiJIUzI1NiJ9", "jwt"),
    Leak("clone https://me:pa55w0rd-xyz@git.example.com/repo.git", "pa55w0rd-xyz",
         "@git.example.com/repo.git"),
    Leak("deploying with plain-looking-value-42", "plain-looking-value-42", "deploying with"),
)

#: Left exactly as it is by every consumer.
HARMLESS = (
    "/home/me/project/src/main.py:42",
    "token count: 5",
    "max_tokens=4096 input_tokens: 12",
    "The model answered in 3.2 s; the author found nothing to report.",
    "KeyError: 'name'",
    'api_key_env = "OPENAI_API_KEY"',
    "API_KEY=${OPENAI_API_KEY}",
    "a risk-assessment of the task-runner",
    "see https://example.com/docs?page=2",
    "Claude rejected its credentials: check its API key",
    '{"apiKeySource": "ANTHROPIC_API_KEY", "authMethods": [], "keep_key": "chat-7"}',
)

#: Names whose values Preferences hides (and every consumer masks).
SECRET_NAMES = ("OPENAI_API_KEY", "GH_PAT", "PAT", "GITHUB_TOKEN", "ANTHROPIC_AUTH_TOKEN",
                "db_password", "AWS_SECRET_ACCESS_KEY", "MYAPIKEY", "CLIENT_SECRET",
                "GOOGLE_APPLICATION_CREDENTIALS", "AUTH", "apiKey", "x-api-key", "Authorization",
                "MYSQL_PWD", "NPM_AUTH", "session_cookie")
#: Names that look a little like those but hold nothing secret.
PLAIN_NAMES = ("PATH", "HOME", "PWD", "OLDPWD", "KEYBOARD_LAYOUT", "KEYMAP", "HTTPS_PROXY", "LANG",
               "SSH_AUTH_SOCK", "max_tokens", "author", "api_key_env", "KeyError",
               "XDG_SESSION_TYPE", "token_count")
