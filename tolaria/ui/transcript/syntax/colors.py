"""Token colours for the light and the dark theme, close to GitHub's (Primer) code colours,
which read well on the code surface of both designed themes (contrast >= 4.5:1 on it)."""

from __future__ import annotations

from pygments.token import (
    Comment,
    Error,
    Generic,
    Keyword,
    Name,
    Number,
    Operator,
    String,
    Token,
    _TokenType,
)
from PySide6.QtGui import QColor, QFont, QTextCharFormat

from tolaria.ui import theme

#: Token type -> (light colour, dark colour, style: "" / "bold" / "italic").
STYLE: dict[_TokenType, tuple[str, str, str]] = {
    Keyword: ("#cf222e", "#ff7b72", ""),
    Keyword.Constant: ("#0550ae", "#79c0ff", ""),
    Keyword.Type: ("#953800", "#ffa657", ""),
    Name.Builtin: ("#8250df", "#d2a8ff", ""),
    Name.Builtin.Pseudo: ("#0550ae", "#79c0ff", ""),
    Name.Function: ("#8250df", "#d2a8ff", ""),
    Name.Function.Magic: ("#8250df", "#d2a8ff", ""),
    Name.Class: ("#953800", "#ffa657", ""),
    Name.Decorator: ("#8250df", "#d2a8ff", ""),
    Name.Namespace: ("#24292f", "#e6edf3", ""),
    Name.Tag: ("#116329", "#7ee787", ""),
    Name.Attribute: ("#0550ae", "#79c0ff", ""),
    Name.Constant: ("#0550ae", "#79c0ff", ""),
    Name.Variable: ("#953800", "#ffa657", ""),
    Name.Label: ("#0550ae", "#79c0ff", ""),
    Name.Exception: ("#953800", "#ffa657", ""),
    String: ("#0a3069", "#a5d6ff", ""),
    String.Escape: ("#0550ae", "#79c0ff", ""),
    String.Regex: ("#116329", "#7ee787", ""),
    String.Interpol: ("#0550ae", "#79c0ff", ""),
    Number: ("#0550ae", "#79c0ff", ""),
    Operator.Word: ("#cf222e", "#ff7b72", ""),
    Comment: ("#6e7781", "#8b949e", "italic"),
    Comment.Preproc: ("#cf222e", "#ff7b72", ""),
    Generic.Heading: ("#0550ae", "#79c0ff", "bold"),
    Generic.Subheading: ("#0550ae", "#79c0ff", "bold"),
    Generic.Inserted: ("#116329", "#7ee787", ""),
    Generic.Deleted: ("#82071e", "#ffa198", ""),
    Generic.Prompt: ("#6e7781", "#8b949e", "bold"),
    Generic.Output: ("#57606a", "#a0a8b2", ""),
    Generic.Emph: ("", "", "italic"),
    Generic.Strong: ("", "", "bold"),
    Error: ("#82071e", "#ffa198", ""),
}

_formats: dict[tuple[bool, _TokenType], QTextCharFormat | None] = {}


def token_format(ttype: _TokenType, dark: bool) -> QTextCharFormat | None:
    """The format of a token in the light or dark theme (None: the text's own colour)."""
    key = (dark, ttype)
    if key in _formats:
        return _formats[key]
    style: tuple[str, str, str] | None = None
    walk: _TokenType | None = ttype
    while walk is not None and walk is not Token:
        style = STYLE.get(walk)
        if style is not None:
            break
        walk = walk.parent
    fmt: QTextCharFormat | None = None
    if style is not None:
        fmt = QTextCharFormat()
        color = style[1] if dark else style[0]
        if color:
            fmt.setForeground(QColor(color))
        if style[2] == "bold":
            fmt.setFontWeight(QFont.Weight.Bold)
        elif style[2] == "italic":
            fmt.setFontItalic(True)
    _formats[key] = fmt
    return fmt


def dark_theme() -> bool:
    return theme.is_dark()
