"""Markdown rendering with Qt's own parser, and chunking (code blocks are coloured by
tolaria/ui/transcript/syntax/).

Agent text never makes Qt load anything: ``SafeDocument`` / ``SafeTextBrowser`` refuse every
resource (an image ``![x](/dev/zero)`` read the device on the GUI thread until the window died,
a FIFO froze it for good), images are shown as links with their alt text, and a click opens
only web and mail links, in the browser (never a local file inside the transcript).

Re-rendering a growing answer costs time proportional to its size, so a long answer is cut into
chunks at safe places (a blank line outside a code fence when there is one): sealed chunks are
rendered once, only the short live tail is rendered again as text streams in.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QUrl
from PySide6.QtGui import (
    QDesktopServices,
    QImage,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)
from PySide6.QtWidgets import QTextBrowser, QWidget

from tolaria.ui import theme

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


@dataclass(frozen=True)
class Split:
    sealed: str
    rest: str


@dataclass(frozen=True)
class Part:
    """A run of markdown prose (``language`` None) or the body of one fenced code block."""

    text: str
    language: str | None = None


def split_fences(text: str) -> list[Part]:
    """``text`` as prose and fenced code blocks, in order. A fence still open at the end (text
    still streaming) is a code block up to the end. Code blocks become widgets of their own
    (a language label, Copy, horizontal scroll); prose is rendered as a document."""
    if "```" not in text and "~~~" not in text:
        return [Part(text)] if text else []
    parts: list[Part] = []
    prose: list[str] = []
    code: list[str] = []
    marker = ""
    language = ""
    for line in text.splitlines(keepends=True):
        m = _FENCE_RE.match(line.rstrip("\n"))
        if not marker:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                if prose:
                    parts.append(Part("".join(prose)))
                    prose = []
                marker, language = m.group(1), m.group(2).strip().split(" ")[0] or ""
            else:
                prose.append(line)
        elif m and m.group(1)[0] == marker[0] and len(m.group(1)) >= len(marker) \
                and not m.group(2).strip():
            parts.append(Part("".join(code).removesuffix("\n"), language))
            code, marker = [], ""
        else:
            code.append(line)
    if marker:
        parts.append(Part("".join(code).removesuffix("\n"), language))
    elif prose:
        parts.append(Part("".join(prose)))
    return parts


def _fence_state(text: str) -> tuple[str | None, list[tuple[int, bool]]]:
    """(opening line of a fence still open at the end, [(offset of each line start, in_fence)])."""
    opener: str | None = None
    marker = ""
    starts: list[tuple[int, bool]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        starts.append((pos, opener is not None))
        m = _FENCE_RE.match(line.rstrip("\n"))
        if m:
            if opener is None:
                opener, marker = line.rstrip("\n"), m.group(1)
            elif m.group(1).startswith(marker[0]) and len(m.group(1)) >= len(marker) \
                    and not m.group(2).strip():
                opener = None
        pos += len(line)
    return opener, starts


def split_markdown(text: str, limit: int) -> Split | None:
    """Cut ``text`` (longer than ``limit``) into a sealed head and a live rest, or None.

    Prefers the last blank line outside a code fence in the second half of the window; inside a
    fence the fence is closed in the head and reopened in the rest; failing both, the cut is at
    the last line break or space (a paragraph may then be split in two, visually harmless).
    """
    if len(text) <= limit:
        return None
    window = text[: limit]
    _opener, starts = _fence_state(window)
    floor = limit // 2
    # A blank line outside a fence: the line starting at `offset` is empty.
    for offset, in_fence in reversed(starts):
        if offset < floor:
            break
        if not in_fence and text.startswith("\n", offset) and offset > 0:
            return Split(text[:offset].rstrip("\n"), text[offset:].lstrip("\n"))
    cut = window.rfind("\n", floor)
    if cut < 0:
        cut = window.rfind(" ", floor)
    if cut < 0:
        cut = limit
    head = text[:cut]
    rest = text[cut + 1:] if text.startswith("\n", cut) else text[cut:]
    opener, _ = _fence_state(head)
    # (A fence line longer than the cut could make the rest grow: then do not reopen it.)
    if opener is not None and len(opener) < floor // 2:
        fence = _FENCE_RE.match(opener)
        close = fence.group(1) if fence else "```"
        return Split(head + "\n" + close, opener + "\n" + rest)
    return Split(head, rest)


_IMG_TAG_RE = re.compile(r"<img", re.IGNORECASE)
#: Link schemes a click may open (in the system's browser or mail program).
_OPEN_SCHEMES = {"http", "https", "mailto"}


class SafeDocument(QTextDocument):
    """A document that loads no resource: what agent text names (``/dev/zero``, a FIFO, a
    huge file, a URL) must never be read, and certainly not on the GUI thread.

    An image gets an empty 1x1 picture (until ``render_markdown`` turns it into a link): with
    no picture at all Qt's image handler falls back to reading the file itself (``QImage``
    ``load``), which is exactly the hang on a FIFO.
    """

    def loadResource(self, type: int, name: QUrl | str) -> Any:
        if type in (QTextDocument.ResourceType.ImageResource,
                    QTextDocument.ResourceType.ImageResource.value):
            placeholder = QImage(1, 1, QImage.Format.Format_ARGB32)
            placeholder.fill(0)
            return placeholder
        return None


class SafeTextBrowser(QTextBrowser):
    """A read-only rich-text view for agent text: a ``SafeDocument``, no resource loading of
    its own, and links opened outside (web and mail only), never followed inside the view
    (``setSource`` would read a local file: the same hang as an image)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDocument(SafeDocument(self))
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(open_link)

    def loadResource(self, type: int, name: QUrl | str) -> Any:
        return None


def plain_tooltip(text: str) -> str:
    """``text`` as a tooltip that shows exactly that text. Qt renders a tooltip as rich text
    when its first line holds anything like a tag, so a chat title, a folder name or a
    program's ``--version`` output reading ``<img src=FIFO>`` would be loaded on hover: the
    text is escaped inside explicit rich text instead."""
    if not text:
        return text
    return f'<p style="white-space:pre-wrap">{html.escape(text)}</p>'


def open_link(url: QUrl) -> None:
    """Open a clicked link if it is a web or mail link; anything else is ignored."""
    if url.scheme().lower() in _OPEN_SCHEMES:
        QDesktopServices.openUrl(url)


def _images_as_links(document: QTextDocument) -> None:
    """Each image becomes its alt text (or its address), linked to its address: shown, and
    never loaded."""
    found: list[tuple[int, int, str, str]] = []
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if fmt.isImageFormat():
                image = fmt.toImageFormat()
                alt = str(image.property(QTextFormat.Property.ImageAltText) or "").strip()
                found.append((fragment.position(), fragment.length(), image.name(), alt))
            it += 1
        block = block.next()
    if not found:
        return
    cursor = QTextCursor(document)
    cursor.beginEditBlock()
    for position, length, name, alt in reversed(found):  # from the end: positions stay valid
        cursor.setPosition(position)
        cursor.setPosition(position + length, QTextCursor.MoveMode.KeepAnchor)
        link = QTextCharFormat()
        link.setAnchor(True)
        link.setAnchorHref(name)
        link.setFontUnderline(True)
        link.setToolTip(plain_tooltip(name))
        cursor.insertText(f"[image: {alt or name}]", link)


#: Heading sizes relative to body text, by level: a calm type scale (Qt's own goes to ~2x).
HEADING_SCALE = {1: 1.25, 2: 1.15, 3: 1.07}


def _scale_headings(document: QTextDocument) -> None:
    base = document.defaultFont().pointSizeF()
    if base <= 0:
        base = theme.body_point_size()
    cursor = QTextCursor(document)
    block = document.begin()
    cursor.beginEditBlock()
    while block.isValid():
        level = block.blockFormat().headingLevel()
        if level:
            cursor.setPosition(block.position())
            cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock,
                                QTextCursor.MoveMode.KeepAnchor)
            char = QTextCharFormat()
            char.setProperty(QTextFormat.Property.FontSizeAdjustment, 0)
            char.setFontPointSize(base * HEADING_SCALE.get(level, 1.0))
            char.setFontWeight(700 if level <= 2 else 600)
            cursor.mergeCharFormat(char)
            fmt = QTextBlockFormat(block.blockFormat())
            fmt.setTopMargin(10 if level <= 2 else 6)
            fmt.setBottomMargin(4)
            cursor.setBlockFormat(fmt)
        block = block.next()
    cursor.endEditBlock()


def render_markdown(document: QTextDocument, text: str) -> None:
    """Replace ``document``'s content with ``text`` rendered as markdown; style code blocks;
    images (markdown or HTML) become links (give it a ``SafeDocument``: nothing is loaded)."""
    document.setMarkdown(text, QTextDocument.MarkdownFeature.MarkdownDialectGitHub)
    if "![" in text or _IMG_TAG_RE.search(text):  # the scan costs a pass over the document
        _images_as_links(document)
    if "#" in text:
        _scale_headings(document)
    if "```" not in text and "~~~" not in text:
        return
    cursor = QTextCursor(document)
    background = theme.code_background()
    mono = theme.mono_font()
    fence = QTextFormat.Property.BlockCodeFence
    block = document.begin()
    cursor.beginEditBlock()
    while block.isValid():
        if block.blockFormat().hasProperty(fence):
            cursor.setPosition(block.position())
            fmt = QTextBlockFormat(block.blockFormat())
            fmt.setBackground(background)
            fmt.setLeftMargin(6)
            fmt.setRightMargin(6)
            # No gaps between the lines of one block: the background must be continuous.
            previous, following = block.previous(), block.next()
            if previous.isValid() and previous.blockFormat().hasProperty(fence):
                fmt.setTopMargin(0)
            if following.isValid() and following.blockFormat().hasProperty(fence):
                fmt.setBottomMargin(0)
            cursor.setBlockFormat(fmt)
            cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock,
                                QTextCursor.MoveMode.KeepAnchor)
            char = QTextCharFormat()
            char.setFontFamilies([mono.family()])
            cursor.mergeCharFormat(char)
        block = block.next()
    cursor.endEditBlock()
