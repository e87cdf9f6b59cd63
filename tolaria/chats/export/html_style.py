"""The HTML export's style sheet: light and dark from the reader's system
(``prefers-color-scheme``), a toggle that flips it without a script (a checkbox and ``:has``),
and Pygments' token colours for each (``default`` light, ``github-dark`` dark)."""

from __future__ import annotations

import functools

from pygments.formatters import HtmlFormatter

LIGHT = """--bg:#ffffff;--fg:#1f2328;--muted:#6e7781;--line:#d8dee4;--card:#f6f8fa;
--bubble:#eef2f7;--code:#f6f8fa;--accent:#2f6fbd;--ok:#1a7f37;--error:#cf222e;
--warning:#9a6700;--add:#dafbe1;--del:#ffebe9;--hunk:#6e7781;color-scheme:light;"""
DARK = """--bg:#1b1d21;--fg:#e6e6e6;--muted:#9198a1;--line:#30363d;--card:#22262c;
--bubble:#2b3038;--code:#16181c;--accent:#6ea8fe;--ok:#3fb950;--error:#f85149;
--warning:#d29922;--add:#1f3a28;--del:#4a2227;--hunk:#9198a1;color-scheme:dark;"""

#: When the light / dark colours apply: the system's scheme, unless the toggle is on.
_AS_LIGHT = ("@media (prefers-color-scheme: light)", ":root:not(:has(#flip:checked))",
             "@media (prefers-color-scheme: dark)", ":root:has(#flip:checked)")
_AS_DARK = ("@media (prefers-color-scheme: dark)", ":root:not(:has(#flip:checked))",
            "@media (prefers-color-scheme: light)", ":root:has(#flip:checked)")

LAYOUT = """
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.55 system-ui,-apple-system,
"Segoe UI",Ubuntu,Cantarell,"Noto Sans",sans-serif}
main{max-width:860px;margin:0 auto;padding:24px 20px 64px}
header.chat{border-bottom:1px solid var(--line);padding-bottom:12px;margin-bottom:8px}
header.chat h1{font-size:22px;margin:0 0 6px}
.meta,.who,.status,.notice,.tstatus,.lang,.changes .title{color:var(--muted);font-size:13px}
.meta span+span:before{content:" · "}
.flip{position:absolute;opacity:0;pointer-events:none}
.flipper{float:right;cursor:pointer;border:1px solid var(--line);border-radius:6px;
padding:2px 10px;font-size:13px;color:var(--muted);user-select:none}
.flip:focus-visible+.flipper{outline:2px solid var(--accent)}
section.turn{padding:18px 0 10px;border-bottom:1px solid var(--line)}
.who{display:flex;gap:8px;align-items:baseline;margin:0 0 6px}
.who b{color:var(--fg);font-size:14px}
.who a{color:var(--muted);text-decoration:none;margin-left:auto}
.bubble{background:var(--bubble);border-radius:12px;padding:10px 14px;white-space:pre-wrap;
overflow-wrap:anywhere}
.attachments{display:flex;flex-wrap:wrap;gap:8px;margin-top:6px}
.attachments img{max-width:320px;max-height:240px;border-radius:8px;display:block}
.attachments figure{margin:0}.attachments figcaption,.attachment{color:var(--muted);font-size:12px}
.agent{margin-top:14px}
.answer{overflow-wrap:anywhere}
.answer p{margin:.5em 0}
.answer h3,.answer h4,.answer h5,.answer h6{margin:1em 0 .4em;line-height:1.3}
.answer table{border-collapse:collapse;margin:.6em 0;display:block;overflow-x:auto}
.answer th,.answer td{border:1px solid var(--line);padding:4px 10px;text-align:left}
.answer blockquote{margin:.5em 0;padding:0 12px;border-left:3px solid var(--line);
color:var(--muted)}
a{color:var(--accent)}
code{font:13px/1.45 ui-monospace,"SF Mono","Cascadia Code","DejaVu Sans Mono",Menlo,
monospace}
:not(pre)>code{background:var(--code);border:1px solid var(--line);border-radius:4px;
padding:0 4px;font-size:.88em}
pre{margin:0;padding:10px 12px;overflow-x:auto;background:var(--code);
font:13px/1.45 ui-monospace,"SF Mono","Cascadia Code","DejaVu Sans Mono",Menlo,monospace}
.code{border:1px solid var(--line);border-radius:8px;margin:.6em 0;overflow:hidden}
.code .lang{padding:3px 12px;border-bottom:1px solid var(--line);background:var(--card)}
details.tool,.error,details.thinking,.changes{border:1px solid var(--line);border-radius:8px;
margin:8px 0;background:var(--card)}
details>summary{cursor:pointer;padding:6px 12px;list-style-position:inside}
details.tool>summary{display:flex;gap:10px;align-items:baseline;list-style:none}
details.tool>summary:before{content:"▸";color:var(--muted)}
details.tool[open]>summary:before{content:"▾"}
.tname{font-weight:600;white-space:nowrap}
.cmd{flex:1;min-width:0;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
background:none;border:0}
.tstatus{white-space:nowrap}
.tool .body{border-top:1px solid var(--line)}
.tool .label{padding:6px 12px 2px;color:var(--muted);font-size:12px;text-transform:uppercase;
letter-spacing:.04em}
.tool pre{max-height:480px;overflow:auto;border-radius:0}
details.input>summary{font-size:12px;color:var(--muted)}
.diff .add{background:var(--add);display:block}
.diff .del{background:var(--del);display:block}
.diff .hunk{color:var(--hunk);display:block}
details.thinking>summary{color:var(--muted);font-style:italic}
.thought{padding:4px 14px 10px;white-space:pre-wrap;color:var(--muted);font-size:14px}
.error{border-color:var(--error);padding:8px 12px}
.error strong{color:var(--error)}
.error .hint{margin-top:4px}
.error details>summary{padding:6px 0 0;color:var(--muted);font-size:13px}
.notice{font-style:italic;margin:6px 0}
.status{margin-top:10px}
.tone-ok{color:var(--ok)}.tone-error{color:var(--error)}.tone-warning{color:var(--warning)}
.tone-muted{color:var(--muted)}
.survivors{color:var(--warning);font-size:13px}
.changes{padding:6px 12px}
.changes ul{margin:4px 0;padding-left:18px;font-size:13px}
.abandoned>details>summary{color:var(--muted);font-style:italic;padding:6px 0}
footer{color:var(--muted);font-size:13px;padding-top:14px}
@media print{.flip,.flipper{display:none}details{break-inside:avoid}}
"""


def _scoped(media: str, root: str, body: str) -> str:
    return f"{media}{{{root}{{{body}}}}}\n"


@functools.cache
def style_sheet() -> str:
    colours = "".join(_scoped(_AS_LIGHT[m], _AS_LIGHT[m + 1], LIGHT) for m in (0, 2))
    colours += "".join(_scoped(_AS_DARK[m], _AS_DARK[m + 1], DARK) for m in (0, 2))
    tokens = []
    for scheme, style in ((_AS_LIGHT, "default"), (_AS_DARK, "github-dark")):
        for m in (0, 2):
            rules = HtmlFormatter(style=style).get_token_style_defs(f"{scheme[m + 1]} .hl")
            tokens.append(f"{scheme[m]}{{\n" + "\n".join(rules) + "\n}\n")
    return f":root{{{LIGHT}}}\n{colours}{LAYOUT}{''.join(tokens)}"
