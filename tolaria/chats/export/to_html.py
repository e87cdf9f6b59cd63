"""The HTML export: one self-contained file (inline CSS, no script, nothing loaded), the chat as
the window shows it: prompts in bubbles, answers rendered from Markdown with code highlighted by
Pygments, tool cards with their output and the diff of an edit, errors, each turn's status line.

Every piece of text is escaped where it is written (``html.escape``; the answer through
tolaria/chats/export/mdhtml.py, which escapes before it marks up). Written turn by turn.

Highlighting costs ~5 ms per KB of code (Pygments' lexers are pure Python): a chat gets its
first ``HIGHLIGHT_BUDGET`` characters of code highlighted, later code blocks are shown plain
(said in the footer), so a 5,000-turn chat still exports in seconds (docs/PERFORMANCE.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any, TextIO

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from tolaria.chats.export import mdhtml
from tolaria.chats.export.html_style import style_sheet
from tolaria.chats.export.to_json import Totals
from tolaria.chats.export.words import (
    TONES,
    changes_line,
    input_json,
    status_line,
    tool_headline,
    tool_status,
    usage_line,
    when,
)
from tolaria.core.attachments.model import human_size

#: Characters of code highlighted per export; one block longer than BLOCK_LIMIT stays plain.
HIGHLIGHT_BUDGET = 64 * 1024
BLOCK_LIMIT = 32 * 1024
#: An edit whose diff is shorter than this many lines is shown open (as the transcript does).
OPEN_DIFF_LINES = 24
_MARKS = {"done": "✓", "failed": "✗", "cancelled": "■", "interrupted": "■", "running": "●",
          "pending": "◌"}


class Highlighter:
    """Code blocks as HTML: Pygments while the budget lasts, plain escaped text after."""

    def __init__(self, budget: int = HIGHLIGHT_BUDGET) -> None:
        self.budget = budget
        self.skipped = 0
        self._formatter = HtmlFormatter(nowrap=True)
        self._lexers: dict[str, Lexer | None] = {}

    def _lexer(self, language: str) -> Lexer | None:
        key = language.lower()
        if key not in self._lexers:
            try:
                self._lexers[key] = get_lexer_by_name(key) if key else None
            except ClassNotFound:
                self._lexers[key] = None
        return self._lexers[key]

    def __call__(self, code: str, language: str) -> str:
        lexer = self._lexer(language)
        if lexer is not None and len(code) <= min(self.budget, BLOCK_LIMIT):
            self.budget -= len(code)
            body = highlight(code, lexer, self._formatter)
        else:
            if lexer is not None:
                self.skipped += 1
            body = escape(code) + "\n"
        label = f'<div class="lang">{escape(language)}</div>' if language else ""
        return (f'<div class="code">{label}<pre class="hl"><code>{body}</code></pre>'
                "</div>\n")


def write_html(head: dict[str, Any], turns: Iterable[dict[str, Any]], out: TextIO) -> None:
    chat = head["chat"]
    title = escape(chat["title"] or "Untitled chat")
    out.write(f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
              f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
              f'<meta name="generator" content="Tolaria {escape(head["tolaria"])}">\n'
              f"<title>{title}</title>\n<style>\n{style_sheet()}</style>\n</head>\n<body>\n"
              '<input type="checkbox" id="flip" class="flip" aria-label="Switch light or dark">'
              "\n<main>\n")
    meta = [f"Agent {escape(chat['agent'])}", f"started {escape(when(chat['created_at']))}",
            f"{head['turn_count']} turns"]
    if chat["cwd"]:
        meta.insert(1, f"in <code>{escape(chat['cwd'])}</code>")
    out.write('<header class="chat"><label for="flip" class="flipper" title="Switch light or '
              f'dark">◐ Theme</label><h1>{title}</h1><div class="meta">'
              + "".join(f"<span>{m}</span>" for m in meta) + "</div></header>\n")
    code = Highlighter()
    totals = Totals()
    for turn in turns:
        totals.add(turn)
        _turn(turn, code, out)
    summary = [f"{totals.turns} turns"]
    used = usage_line({"input_tokens": totals.input_tokens or None,
                       "output_tokens": totals.output_tokens or None,
                       "cost_usd": totals.cost_usd or None})
    if used:
        summary.append(used)
    summary.append(f"exported {escape(when(head['exported_at']))} by Tolaria "
                   f"{escape(head['tolaria'])}")
    if code.skipped:
        summary.append(f"{code.skipped} later code blocks are shown without colours "
                       "(highlighting budget)")
    out.write(f"<footer>{' · '.join(summary)}</footer>\n</main>\n</body>\n</html>\n")


def _turn(turn: dict[str, Any], code: Highlighter, out: TextIO) -> None:
    number = turn["number"]
    classes = f"turn status-{escape(turn['status'])}" + (" abandoned" if turn["abandoned"] else "")
    out.write(f'<section class="{classes}" id="turn-{number}">\n<div class="you">'
              f'<div class="who"><b>You</b><time datetime="{escape(turn["started_at"] or "")}">'
              f'{escape(when(turn["started_at"]))}</time>'
              f'<a href="#turn-{number}">#{number}</a></div>'
              f'<div class="bubble">{escape(turn["prompt"])}</div>'
              f"{_attachments(turn)}</div>\n")
    out.write(f'<div class="agent"><div class="who"><b>{escape(turn["agent"])}</b></div>\n')
    if turn["abandoned"]:
        out.write("<details><summary>Abandoned: this turn was run again. Show the attempt"
                  "</summary>\n")
    for item in turn["items"]:
        _item(item, code, out)
    if turn["abandoned"]:
        out.write("</details>\n")
    tone = TONES.get(turn["status"], "muted")
    out.write(f'<div class="status tone-{tone}">{escape(status_line(turn))}</div>\n')
    if turn["survivors"]:
        names = ", ".join(f"{s['name']} (pid {s['pid']})" for s in turn["survivors"])
        out.write(f'<div class="survivors">⚠ Still running after the stop: {escape(names)}'
                  "</div>\n")
    if turn["changes"] is not None and (lines := changes_line(turn["changes"])):
        out.write('<div class="changes"><div class="title">Changed files</div><ul>'
                  + "".join(f"<li><code>{escape(line)}</code></li>" for line in lines)
                  + "</ul></div>\n")
    out.write("</div>\n</section>\n")


def _attachments(turn: dict[str, Any]) -> str:
    """The prompt's attached files: images inline as data: URLs, others as named chips."""
    parts: list[str] = []
    for file in turn.get("attachments", ()):
        label = f"{escape(file['name'])} · {escape(human_size(file['size']))}"
        if file["kind"] == "image" and file["data"]:
            parts.append(f'<figure class="attachment"><img alt="{escape(file["name"])}" '
                         f'src="data:{escape(file["media_type"])};base64,{file["data"]}">'
                         f"<figcaption>{label}</figcaption></figure>")
        else:
            parts.append(f'<span class="attachment">📎 {label}</span>')
    return f'<div class="attachments">{"".join(parts)}</div>' if parts else ""


def _item(item: dict[str, Any], code: Highlighter, out: TextIO) -> None:
    kind = item["type"]
    if kind == "text":
        out.write(f'<div class="answer">{mdhtml.render(item["text"], code)}</div>\n')
    elif kind == "thinking":
        out.write('<details class="thinking"><summary>Thinking</summary><div class="thought">'
                  f"{escape(item['text'].strip())}</div></details>\n")
    elif kind == "tool":
        _tool(item, out)
    elif kind == "error":
        hint = f'<div class="hint">{escape(item["hint"])}</div>' if item["hint"] else ""
        stderr = (f"<details><summary>stderr ({len(item['stderr'])} lines)</summary><pre>"
                  f"{escape(chr(10).join(item['stderr']))}</pre></details>"
                  if item["stderr"] else "")
        out.write(f'<div class="error"><strong>Error</strong> {escape(item["message"])}'
                  f"{hint}{stderr}</div>\n")
    elif kind == "notice":
        out.write(f'<p class="notice">{escape(item["message"])}</p>\n')
    elif kind == "question":
        out.write(f'<p class="notice">Permission asked: {escape(item["title"])} → '
                  f"{escape(str(item['outcome']))}</p>\n")
    elif kind == "message":
        out.write('<div class="who"><b>You</b> (while it ran)</div>'
                  f'<div class="bubble">{escape(item["text"])}</div>\n')


def _diff(text: str) -> str:
    lines = []
    for line in text.splitlines():
        cls = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1])
        lines.append(f'<span class="{cls}">{escape(line)}</span>' if cls else
                     escape(line) + "\n")
    return '<pre class="diff"><code>' + "".join(lines) + "</code></pre>"


def _tool(tool: dict[str, Any], out: TextIO) -> None:
    status = tool["status"]
    diff = tool["diff"]
    opened = " open" if diff is not None and diff["text"].count("\n") < OPEN_DIFF_LINES else ""
    mark = _MARKS.get(status, "")
    out.write(f'<details class="tool status-{escape(status)}"{opened}><summary>'
              f'<span class="tname">{escape(tool["name"] or "tool")}</span>'
              f'<code class="cmd">{escape(tool_headline(tool))}</code>'
              f'<span class="tstatus tone-{TONES.get(status, "muted")}">'
              f"{mark} {escape(tool_status(tool))}</span></summary>\n<div class=\"body\">")
    if diff is not None:
        out.write(_diff(diff["text"]))
    out.write(f'<div class="label">Output</div><pre>{escape(tool["output"] or "(no output)")}'
              '</pre><details class="input"><summary>Input</summary><pre>'
              f"{escape(input_json(tool['input']))}</pre></details></div></details>\n")
