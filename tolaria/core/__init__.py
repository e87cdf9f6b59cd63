"""Tolaria's Qt-free backend: stream ids, events, adapters, the process registry and runs.

Nothing under ``tolaria.core`` may import Qt (``tests/test_layers.py`` enforces it, with the layer order and no import cycles), so the
headless CLI and the GUI share exactly the same code path for starting and stopping runs.
"""
