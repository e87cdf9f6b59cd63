"""Finding agent programs on this machine (PATH, login shell, install folders) and their native binaries."""
