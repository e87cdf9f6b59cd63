"""macOS conventions in the window (issue 24 item 4), checked offscreen on Linux.

Qt turns ``Ctrl`` into ⌘ on macOS by itself; what Tolaria decides is which keys differ there
(tolaria/ui/window/keymap.py) and which actions go into the application menu (their menu roles). The
window is built with the darwin keymap as it would be on a Mac; the roles are what Qt's Cocoa
menu bar reads to move Preferences, About and Quit.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QMenu, QMessageBox
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver

from tolaria.chats.fanout import FanOutJob, JobMember
from tolaria.config.settings import Settings
from tolaria.ui.window import keymap
from tolaria.ui.window.actions import fixed_shortcuts
from tolaria.ui.window.main_window import MainWindow

Start = Callable[..., AppDriver]
Role = QAction.MenuRole


def _texts(sequences: list[QKeySequence]) -> list[str]:
    return [s.toString() for s in sequences]


def _window(qtbot: QtBot, platform: str) -> MainWindow:
    window = MainWindow(Settings(), keys=keymap.for_platform(platform))
    qtbot.addWidget(window)
    return window


def test_preferences_about_and_quit_carry_the_application_menu_roles(qtbot: QtBot) -> None:
    window = _window(qtbot, "darwin")
    assert window.preferences_action.menuRole() == Role.PreferencesRole
    assert window.about_action.menuRole() == Role.AboutRole
    assert window.quit_action.menuRole() == Role.QuitRole
    # every other action stays in its menu: Qt's default text heuristic would move anything
    # whose text starts with "About", "Settings", "Options"... (a job named after its prompt)
    special = {window.preferences_action, window.about_action, window.quit_action}
    others = [a for a in window.registry.actions() if a not in special]
    others += [a for a in window.findChildren(QAction) if a.text() and a not in special
               and a.menu() is None and a.menuRole() != Role.NoRole]
    wrong = [a.text() for a in others if a.menuRole() != Role.NoRole]
    assert wrong == []
    # and each of the three is in a menu of the window (Qt moves it from there on macOS)
    in_menus = {a for top in window.menuBar().actions() if isinstance(menu := top.menu(), QMenu)
                for a in menu.actions()}
    assert special <= in_menus


def test_quit_and_close_use_the_platforms_standard_keys(qtbot: QtBot) -> None:
    window = _window(qtbot, "darwin")
    standard = QKeySequence.keyBindings(QKeySequence.StandardKey.Quit)
    assert _texts(window.quit_action.shortcuts()) == _texts(standard or [QKeySequence("Ctrl+Q")])
    assert window.view_menu.find_action.shortcut() == QKeySequence(QKeySequence.StandardKey.Find)
    # Qt's Ctrl is ⌘ on macOS: these come out as ⌘N, ⌘, and ⌘K there
    assert window.new_action.shortcut().toString() == "Ctrl+N"
    assert window.preferences_action.shortcut().toString() == "Ctrl+,"
    assert _texts(window.palette_action.shortcuts()) == ["Ctrl+K", "Ctrl+Shift+P"]


def test_esc_still_stops_on_macos(qtbot: QtBot) -> None:
    window = _window(qtbot, "darwin")
    assert window.stop_action.shortcut().toString() == "Esc"
    assert window.stop_all_action.shortcut().toString() == "Shift+Esc"


def test_the_darwin_keymap_changes_only_what_the_ctrl_swap_gets_wrong(qtbot: QtBot) -> None:
    mac, linux = _window(qtbot, "darwin"), _window(qtbot, "linux")
    # ⌘Tab is the app switcher: ⌃Tab (Meta on a Mac) and ⌘} as in Safari
    assert _texts(mac.next_chat_action.shortcuts()) == ["Meta+Tab", "Ctrl+}"]
    assert _texts(mac.previous_chat_action.shortcuts()) == ["Meta+Shift+Tab", "Ctrl+{"]
    assert _texts(mac.sidebar.delete_action.shortcuts()) == ["Ctrl+Backspace", "Del"]
    assert _texts(linux.next_chat_action.shortcuts()) == ["Ctrl+Tab"]
    assert _texts(linux.previous_chat_action.shortcuts()) == ["Ctrl+Shift+Tab"]
    assert _texts(linux.sidebar.delete_action.shortcuts()) == ["Del"]
    windows = keymap.for_platform("win32")
    assert (windows.next_chat, windows.previous_chat, windows.delete_chat) == (
        ("Ctrl+Tab",), ("Ctrl+Shift+Tab",), ("Del",))
    # the Shortcuts page's list follows the keymap
    listed = {f.label: f.keys for f in fixed_shortcuts(mac.keys)}
    assert listed["Next chat"] == "Meta+Tab / Ctrl+}"
    assert listed["Delete chat (when no text field has the focus)"] == "Ctrl+Backspace / Del"


def test_the_darwin_next_chat_key_really_triggers_it(qtbot: QtBot) -> None:
    window = _window(qtbot, "darwin")
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    with qtbot.waitSignal(window.next_chat_action.triggered, timeout=2_000):
        QTest.keyClick(window, Qt.Key.Key_Tab, Qt.KeyboardModifier.MetaModifier)
    with qtbot.assertNotEmitted(window.next_chat_action.triggered, wait=100):
        QTest.keyClick(window, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)


def test_about_opens_a_non_modal_box_with_the_version(start_app: Start, qtbot: QtBot) -> None:
    from tolaria import __version__

    drv = start_app()
    drv.window.about_action.trigger()
    box = drv.window.findChild(QMessageBox, "aboutBox")
    assert box is not None
    qtbot.waitUntil(box.isVisible)
    assert f"Tolaria {__version__}" in box.text()
    assert box.windowModality() != Qt.WindowModality.ApplicationModal  # open(), not exec()
    box.close()


def test_a_job_named_about_or_settings_stays_in_the_jobs_menu(qtbot: QtBot) -> None:
    """A fan-out job's menu entry is its prompt: "About…" must not become macOS's About."""
    window = _window(qtbot, "darwin")
    jobs = [(FanOutJob(f"job-{n}", prompt, (JobMember(n, "demo"),)), "done")
            for n, prompt in enumerate(["About the tests: are they flaky?",
                                        "Settings page: add a field", "Preferences…", "Quit"])]
    window.set_jobs(jobs)
    entries = [a for a in window.jobs_menu.actions() if not a.isSeparator()]
    assert len(entries) == 4
    assert [a.menuRole() for a in entries] == [Role.NoRole] * 4
    window.set_jobs([])  # the "No jobs yet" placeholder too
    assert [a.menuRole() for a in window.jobs_menu.actions()] == [Role.NoRole]
