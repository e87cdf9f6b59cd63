"""The chat export (tolaria/chats/export): a real store, turns written through its own API,
each format parsed back (html.parser, Markdown fences, json.loads) and checked for structure,
escaping, statuses and redaction."""

from __future__ import annotations

import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tolaria.chats.export import (
    ChatNotFound,
    ExportError,
    export_chat,
    export_to_file,
    format_of,
)
from tolaria.chats.export.model import iter_turns
from tolaria.core.events import (
    Diagnostic,
    Done,
    Error,
    PermissionAsked,
    PermissionSettled,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    Usage,
)
from tolaria.core.store.db import MARKER_TURN_RESTARTED, Store

#: A key shape the policy knows (Anthropic), and a value only secret by its variable's name.
KEY = "sk-ant-api03-Zx81kQpLm2NvB7tRw9YcH4jU"
ENV_SECRET = "hunter2-correct-horse-battery"
SCRIPT = "<script>alert('pwned')</script>"


def _turn(store: Store, chat: int, n: int, prompt: str, *events: Any,
          stop: str | None = "end_turn") -> str:
    sid = f"ai-agent-stream-export{n:04d}"
    store.start_turn(chat, sid, "claude", prompt)
    for make in events:
        store.append_event(make(sid))
    if stop is not None:
        store.append_event(Done(sid, stop_reason=stop, duration_ms=1500 + n))
    return sid


@pytest.fixture
def chat(store: Store, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("MY_SERVICE_PASSWORD", ENV_SECRET)
    c = store.create_conversation(f"Fix the {SCRIPT} parser", "claude", "/home/u/proj")
    _turn(store, c.id, 1, f"Why does {SCRIPT} fail? My key is {KEY}",
          lambda s: ThinkingDelta(s, text="The parser reads tags."),
          lambda s: TextDelta(s, text="## Plan\n\nThe **parser** fails on `<tag>`:\n\n"),
          lambda s: TextDelta(s, text="```python\ndef f(x):\n    return x < 1\n```\n\n"
                                      "[ok](https://example.com) [bad](javascript:alert(1))\n"),
          lambda s: ToolStart(s, tool_id="t1", name="Bash",
                              input={"command": "env", "env": {"API_TOKEN": "tok-12345678"}}),
          lambda s: ToolDone(s, tool_id="t1",
                             output=f"ANTHROPIC_API_KEY={KEY}\nMY_SERVICE_PASSWORD={ENV_SECRET}"
                                    "\nHOME=/root\n```\nfence inside\n````\n"),
          lambda s: ToolStart(s, tool_id="t2", name="Edit",
                              input={"file_path": "src/a.py", "old_string": "x = 1\n",
                                     "new_string": "x = 2\n"}),
          lambda s: ToolDone(s, tool_id="t2", output="ok"),
          lambda s: Usage(s, input_tokens=1200, output_tokens=80, cost_usd=0.0123))
    _turn(store, c.id, 2, "and now sleep",
          lambda s: TextDelta(s, text="Sleeping"),
          lambda s: ToolStart(s, tool_id="t3", name="Bash", input={"command": "sleep 100"}),
          stop="cancelled")
    _turn(store, c.id, 3, "fail please",
          lambda s: Diagnostic(s, source="stderr", message=f"auth failed for {KEY}"),
          lambda s: Error(s, message=f"401 with key {KEY}", hint="Check the key",
                          category="auth"),
          stop="error")
    _turn(store, c.id, 4, "ask first",
          lambda s: PermissionAsked(s, key="q1", tool_id="t4", title="Run rm -rf build"),
          lambda s: PermissionSettled(s, key="q1", outcome="reject"),
          lambda s: TextDelta(s, text="Half an answ"), stop=None)
    store.mark_interrupted("ai-agent-stream-export0004")
    sid = _turn(store, c.id, 5, "retry me", lambda s: TextDelta(s, text="first try"))
    turn = store.turn_by_stream(sid)
    assert turn is not None
    store.add_marker(c.id, MARKER_TURN_RESTARTED, turn_id=turn.id)
    store.flush()
    return c.id


def _export(store: Store, chat: int, fmt: str) -> str:
    out = io.StringIO()
    export_chat(store, chat, fmt, out)
    return out.getvalue()


def test_json_is_one_document_with_every_turn_status_and_item(store: Store, chat: int) -> None:
    doc = json.loads(_export(store, chat, "json"))
    assert (doc["format"], doc["version"]) == ("tolaria-chat", 1)
    assert doc["chat"]["title"] == f"Fix the {SCRIPT} parser"  # JSON keeps text as it is
    assert doc["turn_count"] == len(doc["turns"]) == 5
    assert [t["status"] for t in doc["turns"]] == ["completed", "cancelled", "failed",
                                                   "interrupted", "completed"]
    assert [t["number"] for t in doc["turns"]] == [1, 2, 3, 4, 5]
    first = doc["turns"][0]
    assert [i["type"] for i in first["items"]] == ["thinking", "text", "tool", "tool"]
    assert first["usage"] == {"input_tokens": 1200, "output_tokens": 80, "cost_usd": 0.0123}
    assert first["duration_ms"] == 1501
    edit = first["items"][3]
    assert edit["diff"]["path"] == "src/a.py"
    assert "-x = 1" in edit["diff"]["text"] and "+x = 2" in edit["diff"]["text"]
    assert doc["turns"][1]["items"][1]["status"] == "cancelled"  # no result: the turn stopped
    error = doc["turns"][2]["items"][0]
    assert error["type"] == "error" and error["hint"] == "Check the key"
    assert len(error["stderr"]) == 1
    question = doc["turns"][3]["items"][0]
    assert (question["type"], question["outcome"]) == ("question", "reject")
    assert doc["turns"][4]["abandoned"] is True
    assert all(t["attachments"] == [] for t in doc["turns"])
    assert doc["totals"]["turns"] == 5 and doc["totals"]["cost_usd"] == 0.0123


class _Tree(HTMLParser):
    """Tags with their attributes, and the text with the tags it stands in."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.texts: list[tuple[tuple[str, ...], str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in ("meta", "input", "br", "hr"):
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.texts.append((tuple(self.stack), data))

    def of(self, tag: str, cls: str | None = None) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag
                and (cls is None or cls in (a.get("class") or "").split())]


def test_html_is_self_contained_escaped_and_shows_the_turns(store: Store, chat: int) -> None:
    page = _export(store, chat, "html")
    tree = _Tree()
    tree.feed(page)
    tree.close()
    assert tree.stack == []  # every tag closed in order
    # Nothing runs and nothing is fetched: no script, no external resource.
    assert not tree.of("script") and not tree.of("img") and not tree.of("link")
    assert not any("src" in a for _t, a in tree.tags)
    assert "url(" not in page and "@import" not in page
    hrefs = [a["href"] for a in tree.of("a")]
    assert "https://example.com" in hrefs
    assert not any(h and h.lower().startswith("javascript") for h in hrefs)
    # The prompt with a script tag is text, in its bubble; so is the title.
    bubbles = [text for stack, text in tree.texts if stack[-1:] == ("div",) and SCRIPT in text]
    assert bubbles and f"Why does {SCRIPT} fail?" in bubbles[0]
    assert any(stack[-1:] == ("title",) and SCRIPT in text for stack, text in tree.texts)
    sections = tree.of("section")
    assert [a["class"] for a in sections] == [
        "turn status-completed", "turn status-cancelled", "turn status-failed",
        "turn status-interrupted", "turn status-completed abandoned"]
    assert [a["id"] for a in sections] == [f"turn-{n}" for n in range(1, 6)]
    tools = tree.of("details", "tool")
    assert len(tools) == 3
    assert "open" in tools[1]  # the small edit shows its diff at once
    assert len(tree.of("span", "add")) == 1 and len(tree.of("span", "del")) == 1
    assert tree.of("div", "error") and tree.of("details", "thinking")
    # Code is highlighted (Pygments' classes) and the answer's markup rendered.
    assert tree.of("pre", "hl") and tree.of("span", "k")
    assert any(stack[-2:] == ("p", "code") and text == "<tag>" for stack, text in tree.texts)
    statuses = [text for stack, text in tree.texts if stack[-1:] == ("div",) and text.startswith(
        ("Completed", "Stopped", "Failed", "Interrupted"))]
    assert statuses[:4] == ["Completed in 1.5 s · 1,200 in / 80 out tokens · $0.0123",
                            "Stopped after 1.5 s", "Failed after 1.5 s",
                            "Interrupted: Tolaria closed while this turn was running"]
    assert "prefers-color-scheme: dark" in page and 'id="flip"' in page


_FENCE = re.compile(r"^(`{3,})(\S*)$")


def _fences(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block; fails on a fence left open."""
    blocks: list[tuple[str, str]] = []
    body: list[str] = []
    opened, language = "", ""
    for line in text.splitlines():
        m = _FENCE.match(line)
        if not opened and m:
            opened, language, body = m[1], m[2], []
        elif opened and line == opened:
            blocks.append((language, "\n".join(body)))
            opened = ""
        elif opened:
            body.append(line)
    assert not opened, "a fence is never closed"
    return blocks


def test_markdown_has_headings_fences_and_escapes(store: Store, chat: int) -> None:
    text = _export(store, chat, "md")
    assert re.findall(r"^## Turn (\d+)$", text, re.M) == ["1", "2", "3", "4", "5"]
    assert SCRIPT not in text  # the title and the prompt: escaped
    assert "> Why does &lt;script>alert('pwned')&lt;/script> fail?" in text
    blocks = _fences(text)
    languages = [language for language, _ in blocks]
    assert "python" in languages and "diff" in languages and "json" in languages
    output = next(body for language, body in blocks if "fence inside" in body)
    assert output.endswith("fence inside\n````")  # its own fences never closed the block
    assert "-x = 1\n+x = 2" in dict(blocks)["diff"]
    assert "*Stopped after 1.5 s*" in text and "*Abandoned: this turn was run again.*" in text


@pytest.mark.parametrize("fmt", ["json", "md", "html"])
def test_no_secret_reaches_any_format(store: Store, chat: int, fmt: str) -> None:
    text = _export(store, chat, fmt)
    for secret in (KEY, ENV_SECRET, "tok-12345678"):
        assert secret not in text
    assert "***" in text
    assert "HOME=/root" in text  # what is no secret stays


def test_turns_are_read_a_page_at_a_time(store: Store, chat: int) -> None:
    numbers = [t["number"] for t in iter_turns(store, chat, page=2)]
    assert numbers == [1, 2, 3, 4, 5]
    prompts = [t["prompt"] for t in iter_turns(store, chat, page=2)]
    assert prompts[1:] == ["and now sleep", "fail please", "ask first", "retry me"]


def test_unknown_chat_and_format(store: Store, chat: int) -> None:
    with pytest.raises(ChatNotFound):
        _export(store, chat + 100, "json")
    with pytest.raises(ValueError, match="unknown export format"):
        _export(store, chat, "pdf")
    assert [format_of(p) for p in ("a.HTML", "b.md", "c.json", "d.txt")] == [
        "html", "md", "json", "html"]


def test_a_file_is_replaced_only_by_a_whole_export(store: Store, chat: int,
                                                   tmp_path: Path) -> None:
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    target = tmp_path / "chat.html"
    target.write_text("the user's earlier export")
    with pytest.raises(ChatNotFound):
        export_to_file(store, chat + 100, "html", target)
    assert target.read_text() == "the user's earlier export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.html"]  # no temp file left
    assert export_to_file(store, chat, "html", target) == target
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.html"]
    with pytest.raises(ExportError, match="is a folder"):
        export_to_file(store, chat, "html", tmp_path)
    with pytest.raises(ExportError, match="does not exist"):
        export_to_file(store, chat, "html", tmp_path / "nowhere" / "x.html")


def test_empty_chat(store: Store) -> None:
    c = store.create_conversation("", "demo", None)
    assert json.loads(_export(store, c.id, "json"))["turns"] == []
    assert "Untitled chat" in _export(store, c.id, "md")
    tree = _Tree()
    tree.feed(_export(store, c.id, "html"))
    assert tree.stack == [] and not tree.of("section")


@pytest.mark.parametrize("fmt", ["json", "md", "html"])
def test_half_an_emoji_still_makes_a_valid_utf8_file(store: Store, tmp_path: Path,
                                                     fmt: str) -> None:
    c = store.create_conversation("emoji", "claude", None)
    _turn(store, c.id, 1, "smile", lambda s: TextDelta(s, text="before \ud83d"),
          lambda s: TextDelta(s, text=" after é"))
    store.flush()
    target = export_to_file(store, c.id, fmt, tmp_path / f"chat.{fmt}")
    text = target.read_bytes().decode("utf-8")  # strict: fails on a surrogate written as is
    assert "before ? after é" in (json.loads(text)["turns"][0]["items"][0]["text"]
                                  if fmt == "json" else text)
