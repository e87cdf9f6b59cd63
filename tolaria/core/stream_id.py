"""Stream ids: the request-scoped name a run's events travel on, and its cancellation handle.

The UI never sees a pid: it holds only the stream id, and the backend maps a *validated* id to
the processes of that run. See docs/adr/0001-stream-id-contract.md.
"""

from __future__ import annotations

PREFIX = "ai-agent-stream-"
MAX_SUFFIX = 64
MAX_LENGTH = 80
#: No ``re``: ``tolaria abort`` validates an id and its start-up is part of a stop's latency.
_SUFFIX_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")


class InvalidStreamId(ValueError):
    """A string that is not a valid ``ai-agent-stream-*`` id."""


def new_stream_id() -> str:
    """A fresh id: the prefix and 32 lowercase hex characters."""
    import secrets  # here: ``tolaria abort`` validates ids and must start fast

    return PREFIX + secrets.token_hex(16)


def validate_stream_id(value: object) -> str:
    """Return ``value`` unchanged when it is a valid stream id, else raise InvalidStreamId."""
    if not isinstance(value, str):
        raise InvalidStreamId(f"stream id must be a string, not {type(value).__name__}")
    if len(value) > MAX_LENGTH:
        raise InvalidStreamId(f"stream id is {len(value)} characters long; the limit is {MAX_LENGTH}")
    if not value.startswith(PREFIX):
        raise InvalidStreamId(f"stream id {value[:40]!r} does not start with {PREFIX!r}")
    suffix = value[len(PREFIX) :]
    if not suffix:
        raise InvalidStreamId(f"stream id has nothing after {PREFIX!r}")
    if len(suffix) > MAX_SUFFIX or not _SUFFIX_CHARS.issuperset(suffix):
        raise InvalidStreamId(
            f"stream id {value[:80]!r} may only contain A-Z, a-z, 0-9 and '-' after the prefix "
            f"(1 to {MAX_SUFFIX} characters)"
        )
    return value


def is_valid_stream_id(value: object) -> bool:
    try:
        validate_stream_id(value)
    except InvalidStreamId:
        return False
    return True
