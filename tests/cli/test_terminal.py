"""tolaria/cli/terminal.py: what reaches a terminal from an agent's text (issue 14, case 10/11)."""

from __future__ import annotations

import json

import pytest

from tolaria.cli.terminal import for_terminal, json_line, no_surrogates


@pytest.mark.parametrize(("raw", "shown"), [
    ("a\x1b]52;c;cHduZWQ=\x07b", "ab"),  # OSC 52, BEL-terminated: clipboard write
    ("a\x1b]0;title\x1b\\b", "ab"),  # OSC 0, ST-terminated: window title
    ("a\x1b[2J\x1b[Hb", "ab"),  # clear screen, cursor home
    ("a\x9b2Jb\x9d0;t\x9cc", "abc"),  # the same as C1 controls
    ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),  # DCS (sixel)
    ("a\x1b]52;c;unterminated", "a"),  # cut off mid-string: dropped to the end
    ("bell\x07 nul\x00 del\x7f nel\x85", "bell\\x07 nul\\x00 del\\x7f nel\\x85"),
    ("tab\tand\nnew line\r\n", "tab\tand\nnew line\n"),
    ("lone \r return", "lone \\x0d return"),
    ("half \ud800 pair", "half \ufffd pair"),
])
def test_control_sequences_are_removed_or_escaped(raw: str, shown: str) -> None:
    assert for_terminal(raw) == shown


def test_sgr_colour_is_kept_only_when_asked() -> None:
    text = "\x1b[1;31mred\x1b[0m \x1b]0;t\x07\x1b[2J"
    assert for_terminal(text, keep_sgr=True) == "\x1b[1;31mred\x1b[0m "
    assert for_terminal(text) == "red "


def test_json_line_escapes_what_terminals_act_on_and_decodes_exactly() -> None:
    value = {"text": "é ü \x85\x9b\x7f \u2028 \ud800 \x1b[2J"}
    line = json_line(value)
    assert line.isprintable() and "é ü" in line
    assert not any(0x7f <= ord(c) <= 0x9f or 0xd800 <= ord(c) <= 0xdfff for c in line)
    line.encode("utf-8")  # writable as UTF-8
    assert json.loads(line) == value


def test_no_surrogates_leaves_valid_text_alone() -> None:
    assert no_surrogates("plain ✓ 😀") == "plain ✓ 😀"
    assert no_surrogates("\udfff") == "\ufffd"
