"""Fuzzing: generated stream ids (validator and the real control socket), generated garbage
through the dialect parsers, generated adapter manifests. Small enough for CI; the 100k-id
variant is ``python bench/fuzz.py`` (docs/RELIABILITY.md).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import async_test
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tolaria.core.adapters.manifest import ManifestError, parse_manifest
from tolaria.core.events import Event
from tolaria.core.process.control import ControlServer
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.runtimes import make_runtime
from tolaria.core.stream_id import InvalidStreamId, is_valid_stream_id, validate_stream_id

SID = "ai-agent-stream-fuzz"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude"
#: The contract of docs/adr/0001, written independently of tolaria.core.stream_id.
ORACLE = re.compile(r"ai-agent-stream-[A-Za-z0-9-]{1,64}")


# --- stream ids ------------------------------------------------------------------------------


def _ids() -> st.SearchStrategy[str]:
    valid = st.from_regex(ORACLE, fullmatch=True)
    near = st.builds(lambda suffix: "ai-agent-stream-" + suffix, st.text(max_size=70))
    return valid | near | st.text(max_size=100) | valid.map(lambda s: s + "\n") \
        | valid.map(lambda s: " " + s) | valid.map(str.upper)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ids())
def test_validator_accepts_exactly_the_contract(value: str) -> None:
    expected = ORACLE.fullmatch(value) is not None
    assert is_valid_stream_id(value) is expected
    if expected:
        assert validate_stream_id(value) == value
    else:
        with pytest.raises(InvalidStreamId) as err:
            validate_stream_id(value)
        assert str(err.value)


@given(st.none() | st.integers() | st.floats() | st.binary(max_size=20)
       | st.lists(st.text(max_size=5)) | st.dictionaries(st.text(max_size=3), st.integers()))
def test_validator_refuses_non_strings(value: object) -> None:
    assert not is_valid_stream_id(value)


def _socket_requests(rng: random.Random, count: int) -> list[tuple[bytes, bool | None]]:
    """(request line, whether its stream id is valid; None for requests with no usable id)."""
    alphabet = "abcXYZ019-_./ \t\u00e9\u4e2d\x00"
    out: list[tuple[bytes, bool | None]] = []
    for _ in range(count):
        kind = rng.randrange(6)
        if kind == 0:  # well-formed, valid, unknown id
            sid = "ai-agent-stream-" + "".join(rng.choice("abcdef0123456789-") for _ in
                                               range(rng.randint(1, 64)))
            out.append((json.dumps({"op": "abort", "stream_id": sid}).encode() + b"\n", True))
        elif kind == 1:  # near-miss ids
            sid = "ai-agent-stream-" + "".join(rng.choice(alphabet) for _ in
                                               range(rng.randint(0, 80)))
            out.append((json.dumps({"op": "abort", "stream_id": sid}).encode() + b"\n",
                        ORACLE.fullmatch(sid) is not None))
        elif kind == 2:  # wrong types
            value: object = rng.choice([None, 12345, 1.5, True, [], {}, ["ai-agent-stream-x"]])
            out.append((json.dumps({"op": "abort", "stream_id": value}).encode() + b"\n", False))
        elif kind == 3:  # bytes
            out.append((bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))) + b"\n",
                        None))
        elif kind == 4:  # JSON of the wrong shape
            value = rng.choice([[1, 2], "abort", 7, None, {"op": rng.choice(["ls", "", 3])}])
            out.append((json.dumps(value).encode() + b"\n", None))
        else:  # oversized
            out.append((b'{"op":"abort","stream_id":"' + b"a" * rng.randint(4100, 9000) + b'"}\n',
                        None))
    return out


async def ask(path: Path, payload: bytes) -> dict[str, Any]:
    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        writer.write(payload)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()
    answer = json.loads(line)
    assert isinstance(answer, dict)
    return answer


@async_test
async def test_control_socket_takes_only_valid_ids_and_keeps_answering(tmp_path: Path) -> None:
    registry = ProcessRegistry()
    server = ControlServer(registry, folder=tmp_path)
    await server.start()
    try:
        for payload, valid in _socket_requests(random.Random(9), 600):
            answer = await ask(server.path, payload)
            if valid is True:
                assert answer == {"ok": True, "stopped": False}, payload[:100]
            else:
                assert answer["ok"] is False, payload[:100]
                assert isinstance(answer["error"], str) and answer["error"]
        assert (await ask(server.path, b'{"op": "list"}\n'))["ok"] is True
    finally:
        await server.close()


# --- dialect parsers -------------------------------------------------------------------------


def _fixture_lines() -> list[str]:
    return [line for path in sorted(FIXTURES.glob("*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


LINES = _fixture_lines()


def _feed_all(protocol: str, lines: list[str]) -> list[Event]:
    rt = make_runtime(protocol, SID, "fuzz")
    out: list[Event] = []
    for line in lines:
        out += rt.feed(line)
    rt.outcome()
    assert all(e.stream_id == SID for e in out)
    return out


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(LINES), st.floats(0, 1))
def test_truncated_json_lines_never_crash(line: str, where: float) -> None:
    _feed_all("claude-stream-json", [line[: int(len(line) * where)]])


def _mutate(value: Any, data: st.DataObject) -> Any:
    """Replace one randomly chosen node of a JSON value with a value of some other type."""
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: _mutate(value[key], data)}
    if isinstance(value, list) and value and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(value) - 1))
        return [*value[:i], _mutate(value[i], data), *value[i + 1:]]
    return data.draw(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                     | st.text(max_size=10) | st.lists(st.integers(), max_size=3)
                     | st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(LINES), st.data())
def test_wrong_types_in_real_lines_never_crash(line: str, data: st.DataObject) -> None:
    _feed_all("claude-stream-json", [json.dumps(_mutate(json.loads(line), data))])


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(LINES), st.sampled_from(["x", "\u00e9", "\ud83d", "\n", "\\"]))
def test_huge_strings_in_real_lines(line: str, char: str) -> None:
    """Every string of a real line (up to 4 of them) becomes 2 MB of one character."""
    obj = json.loads(line)
    big = char * 2**21
    budget = [4]

    def inflate(value: Any) -> Any:
        if isinstance(value, str) and budget[0] > 0:
            budget[0] -= 1
            return big
        if isinstance(value, dict):
            return {k: v if k == "type" else inflate(v) for k, v in value.items()}
        if isinstance(value, list):
            return [inflate(v) for v in value]
        return value

    _feed_all("claude-stream-json", [json.dumps(inflate(obj))])


@settings(max_examples=20, deadline=None)
@given(st.integers(500, 200_000), st.sampled_from(["[", '{"a":', '{"message":{"content":[']))
def test_deep_nesting_never_crashes(depth: int, opener: str) -> None:
    closer = {"[": "]", '{"a":': "}", '{"message":{"content":[': "]}}"}[opener]
    _feed_all("claude-stream-json", [opener * depth + "1" + closer * depth,
                                     opener * depth])  # and truncated


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=200) | st.binary(max_size=200).map(
    lambda b: b.decode("utf-8", "replace")), max_size=20))
def test_lines_parser_takes_any_text(lines: list[str]) -> None:
    events = _feed_all("lines", lines)
    assert "".join(getattr(e, "text", "") for e in events) == "".join(f"{ln}\n" for ln in lines)


# --- adapter manifests -----------------------------------------------------------------------

_KEYS = ["id", "name", "protocol", "command", "env", "version_command", "install_hint",
         "description", "stop", "resume", "base_url", "model", "api_key_env", "max_iterations",
         "permissions", "shell", "polite", "x"]
_TOML_SCALARS = (st.text(max_size=12) | st.integers(-5, 10**6) | st.floats(allow_nan=False)
                 | st.booleans())
_TOML = st.recursive(_TOML_SCALARS, lambda c: st.lists(c, max_size=4)
                     | st.dictionaries(st.sampled_from(["polite", "polite_window_ms", "PATH",
                                                        "X", "1bad", ""]), c, max_size=3),
                     max_leaves=10)


def _plausible() -> st.SearchStrategy[dict[str, Any]]:
    """Mostly-valid manifests with a few keys broken: reaches the deeper checks."""
    base = st.fixed_dictionaries({
        "id": st.sampled_from(["demo-x", "a", "Bad Id", "", "x" * 70]) | _TOML,
        "protocol": st.sampled_from(["lines", "claude-stream-json", "openai-chat", "acp",
                                     "shell", ""]),
        "command": st.lists(st.sampled_from(["{python}", "-c", "{prompt}", "{cwd}", "sh", "",
                                             "{session_id}", "{nope}"]), max_size=4) | _TOML,
    }, optional={k: _TOML for k in _KEYS if k not in ("id", "protocol", "command")})
    return base


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(_KEYS), _TOML, max_size=8) | _plausible())
def test_generated_manifests_are_valid_or_a_clear_error(data: dict[str, Any]) -> None:
    error: ManifestError | None
    try:
        manifest = parse_manifest(data, Path("fuzz.toml"))
    except ManifestError as exc:
        error = exc
    else:
        error = None
    if error is not None:
        assert error.reason
        assert str(error).startswith("fuzz.toml")
        return
    assert manifest.id == data["id"]
    assert manifest.protocol == data["protocol"]
    assert all(isinstance(part, str) for part in manifest.command)
    assert "shell" not in data  # no key may turn a shell on


# --- settings files --------------------------------------------------------------------------

_SETTINGS_VALUES = st.recursive(_TOML_SCALARS, lambda c: st.lists(c, max_size=3)
                                | st.dictionaries(st.sampled_from(["stop", "stop_all",
                                                                   "watchdog_seconds", "x"]),
                                                  c, max_size=3), max_leaves=8)


def _settings_files() -> st.SearchStrategy[bytes]:
    import tomli_w

    tables = st.dictionaries(st.sampled_from(["shortcuts", "behaviour", "other"]),
                             _SETTINGS_VALUES, max_size=3)
    return (tables.map(lambda d: tomli_w.dumps(d).encode())
            | st.binary(max_size=200)
            | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))


@settings(max_examples=300, deadline=None)
@given(_settings_files())
def test_generated_settings_files_give_settings_or_clear_problems(raw: bytes) -> None:
    import tempfile

    from tolaria.config.settings import Settings, load_settings

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "settings.toml"
        path.write_bytes(raw)
        loaded, problems = load_settings(path)
        assert isinstance(loaded, Settings)
        assert loaded.stop_shortcut.strip() and loaded.stop_all_shortcut.strip()
        assert loaded.watchdog_seconds > 0
        for problem in problems:
            assert problem.startswith(str(path)), problem
        assert path.read_bytes() == raw  # reading never rewrites the user's file
        assert [p.name for p in Path(folder).iterdir()] == ["settings.toml"]
