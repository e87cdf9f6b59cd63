"""The transcript's look: one style sheet, built from the palette, set on the transcript.

Widgets of a turn carry object names and a ``tone`` property instead of style sheets of their
own: a style sheet per widget costs a style pass each and keeps the colours of the theme it was
made in. When the palette changes (``theme.apply_theme``), the transcript sets this sheet again
and every existing item follows.
"""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from tolaria.ui import theme

#: Tones a label may carry (``set_tone``): muted, warning, error, success, or "" (body text).
TONES = ("muted", "warning", "error", "success")


def set_tone(widget: QWidget, tone: str) -> None:
    """Colour ``widget``'s text by its role; re-polished only when the tone changes."""
    if widget.property("tone") == tone:
        return
    widget.setProperty("tone", tone)
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)


def tone_color(tone: str) -> str:
    colors = {"muted": theme.muted_text(), "warning": theme.warning_color(),
              "error": theme.error_colors()[2], "success": theme.success_color()}
    return theme.css(colors.get(tone, theme.text()))


def transcript_css() -> str:
    c = theme.css
    base, text, muted, border = c(theme.base()), c(theme.text()), c(theme.muted_text()), \
        c(theme.border())
    card, code, hover, accent = c(theme.card_background()), c(theme.code_background()), \
        c(theme.hover_background()), c(theme.accent())
    error_bg, error_edge, error_fg = (c(x) for x in theme.error_colors())
    small = round(theme.body_point_size() * 0.88, 1)
    tones = " ".join(f'QLabel[tone="{t}"] {{ color: {tone_color(t)}; }}' for t in TONES)
    return f"""
QWidget#transcriptContent {{ background: {base}; }}
{tones}
QLabel#transcriptPlaceholder {{ color: {muted}; }}
QLabel#author {{ color: {text}; font-weight: 600; }}
QLabel#when, QLabel#elidedNote, QLabel#turnNotice {{ color: {muted}; font-size: {small}pt; }}
QLabel#promptBubble {{ background: {c(theme.prompt_background())}; color: {text};
    border-radius: 10px; padding: 8px 12px; }}
QFrame#toolCard {{ background: {card}; border: 1px solid {border}; border-radius: 8px; }}
QFrame#toolCard QLabel#toolCommand {{ color: {text}; }}
QLabel#toolTail {{ color: {muted}; }}
QFrame#codeBlock {{ background: {code}; border: 1px solid {border}; border-radius: 8px; }}
QFrame#codeHeader {{ border: none; border-bottom: 1px solid {border}; background: transparent; }}
QLabel#codeLanguage {{ color: {muted}; font-size: {small}pt; }}
QFrame#errorCard {{ background: {error_bg}; border: 1px solid {error_edge}; border-radius: 8px; }}
QFrame#errorCard QLabel#errorTitle {{ color: {error_fg}; font-weight: 600; }}
QFrame#errorCard QLabel#errorHint {{ font-weight: 600; }}
QPlainTextEdit {{ background: transparent; border: none; color: {text};
    selection-background-color: {accent}; }}
QTextBrowser {{ selection-background-color: {accent}; }}
QToolButton {{ border: none; border-radius: 5px; padding: 2px 6px; color: {muted};
    background: transparent; }}
QToolButton:hover {{ background: {hover}; color: {text}; }}
QToolButton:checked {{ color: {text}; }}
QToolButton#disclosure {{ padding-left: 0; }}
QToolButton#toolName {{ font-weight: 600; color: {text}; padding-left: 0; }}
QPushButton {{ border: 1px solid {border}; border-radius: 6px; padding: 4px 12px;
    background: {base}; color: {text}; }}
QPushButton:hover {{ border-color: {accent}; }}
QPushButton:default {{ background: {accent}; color: #ffffff; border-color: {accent}; }}
QScrollBar:horizontal {{ height: 8px; background: transparent; margin: 0; }}
QScrollBar::handle:horizontal {{ background: {border}; border-radius: 4px; min-width: 32px; }}
QScrollBar::add-line:horizontal, QScrollBar::sub-line:horizontal {{ width: 0; }}
QScrollBar::add-page:horizontal, QScrollBar::sub-page:horizontal {{ background: none; }}
"""


def scrollbar_css() -> str:
    """A thin vertical scroll bar without arrows (the transcript's own)."""
    border, muted = theme.css(theme.border()), theme.css(theme.muted_text())
    return f"""
QScrollBar:vertical {{ width: 10px; background: transparent; margin: 2px; }}
QScrollBar::handle:vertical {{ background: {border}; border-radius: 3px; min-height: 40px; }}
QScrollBar::handle:vertical:hover {{ background: {muted}; }}
QScrollBar::add-line:vertical, QScrollBar::sub-line:vertical {{ height: 0; }}
QScrollBar::add-page:vertical, QScrollBar::sub-page:vertical {{ background: none; }}
"""


def pane_css() -> str:
    """The chat pane's own controls (composer row, find bar): flat, themed, no raised grey."""
    c = theme.css
    border, accent, base, text, hover = c(theme.border()), c(theme.accent()), c(theme.base()), \
        c(theme.text()), c(theme.hover_background())
    return f"""
QPushButton#sendButton, QPushButton#stopButton, QPushButton#restartButton {{
    border: 1px solid {border}; border-radius: 8px; padding: 4px 14px; background: {base};
    color: {text}; }}
QPushButton#sendButton {{ background: {accent}; border-color: {accent}; color: #ffffff;
    font-weight: 600; }}
QPushButton#stopButton {{ border-color: {c(theme.error_colors()[1])}; font-weight: 600; }}
QPushButton:hover {{ border-color: {accent}; }}
QToolButton {{ border: none; border-radius: 5px; padding: 2px 6px; background: transparent; }}
QToolButton:hover {{ background: {hover}; }}
"""


def chrome_css() -> str:
    """The window's own buttons around the chat (New chat, the working folder): flat."""
    c = theme.css
    border, base, text, hover = c(theme.border()), c(theme.base()), c(theme.text()), \
        c(theme.hover_background())
    return f"""
QPushButton#newChatButton, QPushButton#folderButton {{ border: 1px solid {border};
    border-radius: 7px; padding: 4px 12px; background: {base}; color: {text}; }}
QPushButton#newChatButton:hover, QPushButton#folderButton:hover {{ background: {hover}; }}
"""
