"""An agent's Markdown answer as HTML, for the HTML export: fast, and safe by construction.

What agents write: paragraphs, ATX headings, fenced code, lists (nested by indentation),
block quotes, tables, rules, and inline code, bold, italic, strikethrough, links and bare URLs.
Everything is HTML-escaped before any markup is added, so text can never become a tag or an
attribute (raw HTML in an answer is shown as text, as the transcript does); a link keeps its
target only for ``http``, ``https`` and ``mailto``, an image becomes a link naming it (an export
loads nothing).

Not a general CommonMark parser (mistune and markdown-it-py were measured at ~5 ms per 9 KB
answer, 25 s for a 5,000-turn chat; this is ~20x faster: docs/PERFORMANCE.md). Fenced code goes
to ``code`` (the exporter highlights it).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

#: ``code(text, language)`` -> the HTML of a code block.
CodeRenderer = Callable[[str, str], str]

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r"^ {0,3}> ?")
_ITEM = re.compile(r"^( *)([-*+]|\d{1,9}[.)])[ \t]+(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_SAFE_URL = re.compile(r"(?i)^(?:https?://|mailto:)")

_INLINE = re.compile(
    r"(?P<tick>`+)(?P<code>.+?)(?P=tick)"
    r"|\*\*(?P<b>[^*\s](?:.*?[^*\s])?)\*\*"
    r"|(?<![\w*])__(?P<b2>[^_\s](?:.*?[^_\s])?)__(?![\w])"
    r"|(?<![\w*])\*(?P<i>[^*\s](?:[^*]*?[^*\s])?)\*(?![\w*])"
    r"|(?<![\w_])_(?P<i2>[^_\s](?:[^_]*?[^_\s])?)_(?![\w_])"
    r"|~~(?P<s>[^~\s](?:.*?[^~\s])?)~~"
    r"|(?P<img>!)?\[(?P<label>[^\]\n]*)\]\((?P<url>[^)\s]+)(?:\s+&quot;[^)]*?&quot;)?\)"
    r"|(?P<auto>https?://[^\s<>()]*[^\s<>().,;:!?'&])"
)


def _inline_match(m: re.Match[str]) -> str:
    if m["code"] is not None:
        return f"<code>{m['code'].strip()}</code>"
    for group, tag in (("b", "strong"), ("b2", "strong"), ("i", "em"), ("i2", "em"),
                       ("s", "del")):
        if m[group] is not None:
            return f"<{tag}>{_INLINE.sub(_inline_match, m[group])}</{tag}>"
    if m["auto"] is not None:
        return f'<a href="{m["auto"]}">{m["auto"]}</a>'
    label, url = m["label"], m["url"]
    if m["img"]:
        label = f"image: {label or url}"
    label = _INLINE.sub(_inline_match, label) if label else url
    if _SAFE_URL.match(html.unescape(url)):
        return f'<a href="{url}">{label}</a>'
    return f'<span class="link" title="{url}">{label}</span>'


def inline(text: str) -> str:
    """One paragraph's text as HTML (escaped, then marked up)."""
    escaped = html.escape(text)
    if not any(c in escaped for c in "`*_~[:"):
        return escaped
    return _INLINE.sub(_inline_match, escaped)


def render(text: str, code: CodeRenderer) -> str:
    out: list[str] = []
    _blocks(text.splitlines(), code, out)
    return "".join(out)


def _blocks(lines: list[str], code: CodeRenderer, out: list[str]) -> None:
    para: list[str] = []
    i, n = 0, len(lines)

    def flush() -> None:
        if para:
            out.append(f"<p>{inline(chr(10).join(para))}</p>\n")
            para.clear()

    while i < n:
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            flush()
            i += 1
            continue
        first = stripped[0]
        if first in "`~" and (m := _FENCE.match(line)):
            flush()
            marker, body = m[1], []
            i += 1
            while i < n:
                close = lines[i].strip()
                if close.startswith(marker[0] * len(marker)) and not close.strip(marker[0]):
                    break
                body.append(lines[i])
                i += 1
            out.append(code("\n".join(body), m[2]))
            i += 1
            continue
        if first == "#" and (m := _HEADING.match(line)):
            flush()
            level = min(len(m[1]) + 2, 6)  # the export's own headings are h1 and h2
            out.append(f"<h{level}>{inline(m[2] or '')}</h{level}>\n")
        elif first in "-*_" and _RULE.match(line):
            flush()
            out.append("<hr>\n")
        elif first == ">":
            flush()
            quoted = []
            while i < n and lines[i].strip().startswith(">"):
                quoted.append(_QUOTE.sub("", lines[i], count=1))
                i += 1
            out.append("<blockquote>")
            _blocks(quoted, code, out)
            out.append("</blockquote>\n")
            continue
        elif (first in "-*+" or first.isdigit()) and _ITEM.match(line):
            flush()
            i = _list(lines, i, out)
            continue
        elif "|" in line and i + 1 < n and _TABLE_RULE.match(lines[i + 1]) \
                and "-" in lines[i + 1]:
            flush()
            i = _table(lines, i, out)
            continue
        else:
            para.append(stripped)
        i += 1
    flush()


def _list(lines: list[str], i: int, out: list[str]) -> int:
    """Consecutive list items (nested by indentation, with their continuation lines)."""
    stack: list[tuple[int, str]] = []  # (indent, tag) of the open lists
    item: list[str] = []

    def close_item() -> None:
        if item:
            out.append(f"{inline(' '.join(item))}")
            item.clear()

    n = len(lines)
    while i < n:
        line = lines[i]
        m = _ITEM.match(line)
        if m is None:
            if line.strip() and line.startswith((" ", "\t")) and stack:
                item.append(line.strip())  # a continuation line of the item
                i += 1
                continue
            if not line.strip() and i + 1 < n and _ITEM.match(lines[i + 1]):
                i += 1  # a loose list: the blank line between items
                continue
            break
        indent, tag = len(m[1]), "ol" if m[2][0].isdigit() else "ul"
        close_item()
        if stack and indent > stack[-1][0]:
            out.append(f"<{tag}><li>")
            stack.append((indent, tag))
        else:
            while len(stack) > 1 and indent < stack[-1][0]:
                out.append(f"</li></{stack.pop()[1]}>")
            if stack and stack[-1][1] == tag:
                out.append("</li><li>")
            else:
                if stack:
                    out.append(f"</li></{stack.pop()[1]}>")
                start = m[2][:-1]
                begin = f' start="{int(start)}"' if tag == "ol" and start != "1" else ""
                out.append(f"<{tag}{begin}><li>")
                stack.append((indent, tag))
        item.append(m[3])
        i += 1
    close_item()
    while stack:
        out.append(f"</li></{stack.pop()[1]}>")
    out.append("\n")
    return i


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)]


def _table(lines: list[str], i: int, out: list[str]) -> int:
    head = _cells(lines[i])
    out.append("<table><thead><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head)
               + "</tr></thead><tbody>")
    i += 2
    while i < len(lines) and "|" in lines[i] and lines[i].strip():
        cells = _cells(lines[i])
        out.append("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in cells) + "</tr>")
        i += 1
    out.append("</tbody></table>\n")
    return i
