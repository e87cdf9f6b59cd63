"""The Preferences window (issue 5): agents, shortcuts and behaviour, kept in hand-editable TOML."""

from __future__ import annotations

from tolaria.ui.settings.dialog import SettingsDialog

__all__ = ["SettingsDialog"]
