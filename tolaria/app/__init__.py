"""The desktop app's composition root: QApplication, loop, wiring, shutdown."""
