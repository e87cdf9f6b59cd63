"""Widgets: they emit intents (``*_requested``) and render facts; they never call the core."""
