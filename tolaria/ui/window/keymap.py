"""The window's fixed keys per platform: what Qt cannot map by itself.

Qt already turns ``Ctrl`` in a key sequence into Command on macOS (``Ctrl+K`` is ⌘K there, the
physical Control key is ``Meta``), and a ``QKeySequence.StandardKey`` (Quit, Find, Close) is
whatever the platform uses. That leaves the keys where the plain mapping would be wrong:

- the chat cycle: ``Ctrl+Tab`` would become ⌘Tab, the system's app switcher. macOS apps with
  tabs (Safari, Chrome, Zed) use ⌃Tab / ⌃⇧Tab and ⌘⇧] / ⌘⇧[ (``Meta+Tab``, ``Ctrl+}``);
- deleting the selected chat: a Mac keyboard has no Del key (fn+⌫ is one); Finder's
  "Move to Trash" is ⌘⌫ (``Ctrl+Backspace``), so that is added there;
- Quit: ``StandardKey.Quit`` is empty on Windows (Alt+F4 closes the window), where ``Ctrl+Q``
  stays, as the Shortcuts page lists it.

Stop stays Esc everywhere (⌘. is not bound: Esc is the promise, README "Stop").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from PySide6.QtGui import QKeySequence


@dataclass(frozen=True)
class Keymap:
    """Key sequences in Qt's portable text, first one shown in menus."""

    platform: str
    next_chat: tuple[str, ...]
    previous_chat: tuple[str, ...]
    delete_chat: tuple[str, ...]

    def sequences(self, keys: tuple[str, ...]) -> list[QKeySequence]:
        return [QKeySequence(k) for k in keys]


def for_platform(platform: str) -> Keymap:
    if platform == "darwin":
        return Keymap(platform, next_chat=("Meta+Tab", "Ctrl+}"),
                      previous_chat=("Meta+Shift+Tab", "Ctrl+{"),
                      delete_chat=("Ctrl+Backspace", "Del"))
    return Keymap(platform, next_chat=("Ctrl+Tab",), previous_chat=("Ctrl+Shift+Tab",),
                  delete_chat=("Del",))


def current() -> Keymap:
    """This platform's keymap (``sys.platform`` read now: the platform probe fakes it)."""
    return for_platform(sys.platform)


def quit_keys() -> list[QKeySequence]:
    """The platform's Quit (⌘Q, Ctrl+Q), or Ctrl+Q where it has none (Windows)."""
    keys = QKeySequence.keyBindings(QKeySequence.StandardKey.Quit)
    return keys or [QKeySequence("Ctrl+Q")]


def native(keys: str) -> str:
    """A portable key text as this platform writes it (⌘K on macOS), part by part: the
    Shortcuts page's texts hold several sequences ("Ctrl+K / Ctrl+Shift+P", "Ctrl+1 … Ctrl+9")."""
    for separator in (" / ", " … "):
        if separator in keys:
            return separator.join(native(part) for part in keys.split(separator))
    sequence = QKeySequence(keys)
    text = sequence.toString(QKeySequence.SequenceFormat.NativeText)
    return text if text and not sequence.isEmpty() else keys
