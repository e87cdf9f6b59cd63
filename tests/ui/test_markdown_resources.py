"""Agent markdown never makes the window load a file (issue 14, case 9).

Before: ``![d](/path/fifo)`` froze the window for good (Qt opened the FIFO on the GUI thread,
so Stop was impossible) and ``![x](/dev/zero)`` killed it (the browser read the device until
``bad_alloc``). Now nothing named by agent text is loaded: images show as links with their
alt text, and a click on a link never reads a local file into the view.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from PySide6.QtCore import QPoint, Qt, QUrl
from PySide6.QtGui import QImage, QTextCursor, QTextDocument
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from tolaria.ui.transcript.markdown import SafeTextBrowser, render_markdown

ROOT = Path(__file__).resolve().parents[2]

#: Renders argv[1] in the transcript's real widget, shown and laid out, then prints its text.
_RENDER = """
import sys
from PySide6.QtWidgets import QApplication, QWidget
app = QApplication([])
from tolaria.ui.transcript.blocks import RichText
host = QWidget()
host.resize(600, 400)
view = RichText(host)
view.set_markdown(sys.argv[1])
host.show()
app.processEvents()
view.document().size()
view.grab()
print(view.document().toPlainText())
"""


#: Shows a chat titled argv[1] in the window's header, then prints what the title shows.
_TITLE = """
import sys
from PySide6.QtWidgets import QApplication
app = QApplication([])
from tolaria.core.store.db import Conversation
from tolaria.ui.chat.header import ChatHeader
header = ChatHeader()
header.show_conversation(Conversation(1, sys.argv[1], "demo", "/", 0.0, 0.0, None))
header.show()
app.processEvents()
header.grab()
print(header.title.text())
"""


#: Shows the sidebar's tooltip for a chat titled argv[1], then prints what it shows as text.
_TOOLTIP = """
import sys
from PySide6.QtCore import QPoint
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication, QLabel, QToolTip
app = QApplication([])
from tolaria.ui.transcript.markdown import plain_tooltip
label = QLabel("x")
label.show()
tip = plain_tooltip(sys.argv[1] + "\\nyesterday · demo")
QToolTip.showText(QPoint(10, 10), tip, label)
app.processEvents()
document = QTextDocument()
document.setHtml(QToolTip.text())
print(document.toPlainText())
"""


def _render_in_child(text: str, script: str = _RENDER) -> str:
    """Run ``script`` on ``text`` in a child process (a regression hangs or kills the child,
    never the test run); it must finish promptly. Returns what it printed."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", script, text], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    assert time.monotonic() - started < 30
    return result.stdout


def test_a_fifo_and_dev_zero_as_images_render_promptly_as_links(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    markdown = f"before ![d]({fifo}) middle ![x](/dev/zero) after\n\n[a link](/dev/zero)"
    assert _render_in_child(markdown).splitlines()[:2] == ["before [image: d] middle [image: x] after",
                                              "a link"]
    # Raw HTML too (Qt drops what follows an inline tag; what matters: nothing is loaded).
    assert _render_in_child(f'an <img src="{fifo}" alt="f"> <img src="/dev/zero">').startswith(
        "an ")


def test_a_chat_title_with_an_image_tag_is_shown_as_text(tmp_path: Path) -> None:
    """A QLabel guesses rich text from a leading tag: a chat titled from a prompt such as
    ``<img src=FIFO>`` froze the window at every start. Titles are plain text now."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    title = f'<img src="{fifo}"> look'
    assert _render_in_child(title, _TITLE).strip() == title


def test_a_tooltip_with_an_image_tag_is_shown_as_text(tmp_path: Path) -> None:
    """Tooltips are rich text when their first line looks like a tag: the sidebar's (chat
    title), the folder button's (folder name), the agent picker's (``--version`` output)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    title = f'<img src="{fifo}"> and <b>bold</b>  two spaces'
    assert _render_in_child(title, _TOOLTIP).splitlines() == [title, "yesterday · demo"]


def _png(path: Path, size: int) -> Path:
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.red)
    assert image.save(str(path))
    return path


def test_a_local_image_is_never_loaded_and_shows_as_a_link(qtbot: QtBot, tmp_path: Path) -> None:
    png = _png(tmp_path / "real.png", 40)
    view = SafeTextBrowser()
    qtbot.addWidget(view)
    view.resize(500, 300)
    render_markdown(view.document(), f"see ![a chart]({png}) here")
    view.show()
    qtbot.waitExposed(view)
    document = view.document()
    assert document.toPlainText() == "see [image: a chart] here"
    cursor = QTextCursor(document)
    cursor.setPosition(len("see ") + 1)
    assert cursor.charFormat().anchorHref() == str(png)
    assert not cursor.charFormat().isImageFormat()
    # Even asked directly, the document hands out an empty placeholder, not the file's picture.
    loaded = document.resource(QTextDocument.ResourceType.ImageResource, QUrl.fromLocalFile(str(png)))
    assert isinstance(loaded, QImage) and loaded.size().width() == 1


def test_clicking_a_local_link_does_not_load_the_file(qtbot: QtBot, tmp_path: Path) -> None:
    """A QTextBrowser follows links itself by default: a click on ``[x](/dev/zero)`` read the
    device into the view. Now a click opens only web and mail links, outside the view."""
    target = tmp_path / "notes.txt"
    target.write_text("THE FILE'S CONTENT")
    host = QWidget()
    qtbot.addWidget(host)
    host.resize(500, 300)
    view = SafeTextBrowser(host)
    view.resize(500, 300)
    render_markdown(view.document(), f"[open me]({target})")
    host.show()
    qtbot.waitExposed(view)
    clicked: list[QUrl] = []
    view.anchorClicked.connect(clicked.append)
    cursor = QTextCursor(view.document())
    cursor.setPosition(3)
    point: QPoint = view.cursorRect(cursor).center()
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=point)
    qtbot.waitUntil(lambda: bool(clicked))
    assert clicked[0].toString() == str(target)
    assert view.source().isEmpty()
    assert view.document().toPlainText() == "open me"


def test_every_rich_text_view_in_the_ui_is_a_safe_one() -> None:
    """The one place that knows how to show agent rich text safely: no other module makes its
    own QTextBrowser (it would load what agent text names)."""
    offenders = []
    for path in sorted((ROOT / "tolaria").rglob("*.py")):
        if path.name == "markdown.py" and path.parent.name == "transcript":
            continue
        if "QTextBrowser" in path.read_text(encoding="utf-8"):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == [], "use tolaria.ui.transcript.markdown.SafeTextBrowser instead"
