"""Tolaria: a desktop chat app for AI coding-agent CLIs where Stop really stops."""

from __future__ import annotations

__version__ = "0.1.0"
