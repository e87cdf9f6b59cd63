"""The custom-agent form (issue 17, item 5): fields never move under the mouse as messages come
and go, and the messages are plain words, not the manifest's vocabulary."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, open_preferences, type_into
from ui.uihelpers import AppDriver

from tolaria.ui.settings.custom_agent_dialog import CustomAgentDialog, plain_message

Start = Callable[..., AppDriver]
_JARGON = ("argv", "list of strings", "non-empty", "manifest", "toml", "must be")


def test_fields_stay_put_and_messages_are_plain(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    child(dialog, QPushButton, "addAgentButton").click()
    custom = dialog.findChild(CustomAgentDialog, "customAgentDialog")
    assert custom is not None
    qtbot.waitExposed(custom)
    edits = [child(custom, QLineEdit, f"custom_{key}") for key in ("id", "name", "command")]
    protocol = child(custom, QComboBox, "customProtocol")
    save = child(custom, QPushButton, "customAgentSave")

    def places() -> list[int]:
        return [w.mapTo(custom, w.rect().topLeft()).y() for w in (*edits, protocol, save)]

    type_into(edits[0], "fine-id")
    type_into(edits[1], "Fine")
    type_into(edits[2], "my-cli {prompt}")
    assert save.isEnabled()
    before, height = places(), custom.height()
    seen: list[str] = []
    for edit, text in ((edits[0], "Bad Id!"), (edits[1], ""), (edits[2], ""),
                       (edits[2], "my-cli 'unclosed and a very long rest " * 6)):
        type_into(edit, text)
        assert places() == before, f"a field moved after typing {text!r}"
        assert custom.height() == height
        seen += [e.text() for e in custom.errors.values() if e.text()]
    assert not save.isEnabled()
    assert seen, "the problems are shown"
    for message in seen:
        assert not any(word in message.lower() for word in _JARGON), message
    long_error = child(custom, QLabel, "commandError")
    assert long_error.toolTip() == long_error.text(), "the whole message is in the tooltip"
    custom.reject()


def test_plain_message_passes_unknown_messages_through() -> None:
    assert plain_message("id", "must be 1-64 characters of a-z").startswith("Use lowercase")
    assert plain_message("id", "'x' is already used by another agent") == (
        "'x' is already used by another agent")
