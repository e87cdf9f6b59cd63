"""``tolaria usage`` as a real subprocess, over a store a real ``tolaria run`` (the demo agent)
made, with generated turns added to it through the store."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from cli.test_cli import tolaria
from helpers import cli_env

from tolaria.core.events import STOP_END_TURN, Done, Usage
from tolaria.core.store.db import Store

LIMITS = [{"name": "five_hour", "used_percent": 61.0, "resets_at": 4_000_000_000.0,
           "status": "allowed"}]


def _day(days_ago: int) -> float:
    noon = datetime.now().replace(hour=12, minute=0, second=0, microsecond=0)
    return (noon - timedelta(days=days_ago)).timestamp()


@pytest.fixture
def usage_home(tmp_path: Path, work: Path) -> tuple[dict[str, str], Path, Path]:
    env = cli_env(tmp_path / "home")
    ran = tolaria("run", "--agent", "demo", "list the files", env=env, cwd=work)
    assert ran.returncode == 0, ran.stderr
    [db] = (tmp_path / "home").rglob("*.sqlite3")
    store = Store(db)
    try:
        for n, (agent, days_ago) in enumerate([("claude", 10), ("claude", 1), ("codex", 1),
                                               ("codex", 0)]):
            chat = store.create_conversation(f"chat {agent} {n}", agent, None).id
            sid = f"ai-agent-stream-gen{n}"
            store.start_turn(chat, sid, agent, "p", started_at=_day(days_ago))
            store.append_event(Usage(sid, input_tokens=1000 * (n + 1), output_tokens=10,
                                     cache_read_tokens=500,
                                     cost_usd=0.5 if agent == "claude" else None,
                                     rate_limits=LIMITS if agent == "codex" else None))
            store.append_event(Done(sid, stop_reason=STOP_END_TURN, duration_ms=60_000))
    finally:
        store.close()
    return env, work, db


def test_usage_json_per_agent_and_per_day(usage_home: tuple[dict[str, str], Path, Path]) -> None:
    env, work, db = usage_home
    done = tolaria("usage", "--json", env=env, cwd=work)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    rows = {row["key"]: row for row in doc["rows"]}
    assert set(rows) == {"claude", "codex", "demo"}
    assert rows["codex"]["input_tokens"] == 3000 + 4000 and rows["codex"]["cost_usd"] is None
    assert rows["claude"]["cost_usd"] == pytest.approx(1.0)
    assert rows["claude"]["cache_read_tokens"] == 1000
    assert rows["demo"]["turns"] == 1 and rows["demo"]["agent_seconds"] > 0
    assert doc["total"]["turns"] == 5
    assert doc["rate_limits"]["codex"]["windows"] == LIMITS

    store = Store(db)
    try:
        total = store.usage_total()
    finally:
        store.close()
    assert doc["total"]["input_tokens"] == total.input_tokens

    week = tolaria("usage", "--json", "--by", "day", "--since", "7d", env=env, cwd=work)
    doc = json.loads(week.stdout)
    days = [row["key"] for row in doc["rows"]]
    assert days == sorted(days) and len(days) == 2  # the claude turn 10 days ago is out
    assert doc["since"] == (datetime.now().date() - timedelta(days=6)).isoformat()
    assert doc["total"]["turns"] == 4


def test_usage_table_and_bad_input(usage_home: tuple[dict[str, str], Path, Path]) -> None:
    env, work, _ = usage_home
    table = tolaria("usage", "--by", "chat", env=env, cwd=work)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["chat", "turns", "in"]
    assert any("chat codex 3" in line and "—" in line for line in lines)
    assert any(line.startswith("total") and " 5 " in line for line in lines)
    assert any(line.startswith("codex: 5-hour limit: 61 % used") for line in lines)
    bad = tolaria("usage", "--since", "last tuesday", env=env, cwd=work)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("tolaria: --since: 'last tuesday' is not a date")
