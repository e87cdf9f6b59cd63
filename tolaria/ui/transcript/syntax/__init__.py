"""Syntax highlighting of code blocks and diffs with Pygments: which lexer (``lexers``), tokens
by line, lexed lazily and resumed where text grew (``lines``), their colours for the current
theme (``colors``), applied to a text document as Qt formats (``highlighter``)."""
